"""The seam between the search and whatever runs its candidates.

The search (reducer/search/driver.py) knows only a callable ``source -> bool``; the oracle
(reducer/failure/oracle.py) turns that into runs through a ``CandidateRunner`` and judges each Outcome
against the target Signature. Whatever implements ``CandidateRunner`` can run candidates: the
local ``reducer.run.runner.Runner`` (cold processes, or forks of warm interpreters), or slots on other
hosts — actors on a cluster of GPU machines for a team that outgrows one box — without a change to
the search or the oracle.

A warm interpreter is a ``WarmSlot``: started once with the script's heavy imports, it makes one
child per candidate, and stops (reducer/run/zygote.py's ``Zygote``).
"""
from __future__ import annotations

import inspect
import threading
from pathlib import Path
from typing import Callable, Protocol, runtime_checkable

from reducer.failure.outcome import Outcome, TracebackRecord
from reducer.run.runner import RunSpec


@runtime_checkable
class CandidateRunner(Protocol):
    """Runs one candidate of the script in ``spec`` and returns what a cold run would show.

    Contract (what the oracle relies on): the candidate runs as ``__main__`` in its own scratch
    copy of the script's folder, with ``spec.args``, the environment plus ``extra_env`` (the GPU it
    was given), in its own process group that is killed when the run ends; ``timeout`` and
    ``max_rss`` bound it; the Outcome carries the streams and every traceback in them. May be
    ignored by a remote implementation: ``stop_when`` (stop once the target is on screen) and
    ``cancel`` (set when the search no longer needs this run's verdict: stop it, and return any
    Outcome; it is never read) — both only save time. ``cancel`` is passed only when there is one,
    so an implementation without it still serves one slot. ``warm``: False forces a cold start (the
    final verdict is always a cold run). An implementation written before ``cancel`` joined this
    protocol (a ``run`` without it) is still served: ``accepts_cancel`` tells, and the oracle
    passes ``cancel`` only to a ``run`` that takes it."""

    spec: RunSpec

    def run(self, source: str, *, timeout: float | None = None, extra_env: dict[str, str] | None = None,
            stop_when: Callable[[list[TracebackRecord]], bool] | None = None, max_rss: int | None = None,
            stop_grace: float = 2.0, warm: bool | None = None,
            cancel: threading.Event | None = None) -> Outcome: ...


def accepts_cancel(fn: Callable[..., object]) -> bool:
    """Whether ``fn`` (a runner's ``run``, an oracle) takes ``cancel=``: a run it can stop early."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "cancel" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


@runtime_checkable
class WarmSlot(Protocol):
    """A warm interpreter: start (import the stack, never touching CUDA), one child per
    candidate, stop. reducer/run/zygote.py's ``Zygote`` is the local one."""

    def start(self) -> object: ...

    def fork(self, script: str, args: list[str], cwd: Path, env: dict[str, str], stdout_fd: int,
             stderr_fd: int) -> object: ...

    def stop(self) -> None: ...
