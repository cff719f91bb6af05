"""The seam between the search and whatever runs its candidates.

The search (reducer/search.py) knows only a callable ``source -> bool``; the oracle
(reducer/oracle.py) turns that into runs through a ``CandidateRunner`` and judges each Outcome
against the target Signature. Whatever implements ``CandidateRunner`` can run candidates: the
local ``reducer.runner.Runner`` (cold processes, or forks of warm interpreters), or slots on other
hosts — actors on a cluster of GPU machines for a team that outgrows one box — without a change to
the search or the oracle.

A warm interpreter is a ``WarmSlot``: started once with the script's heavy imports, it makes one
child per candidate, and stops (reducer/zygote.py's ``Zygote``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Protocol, runtime_checkable

from reducer.outcome import Outcome, TracebackRecord
from reducer.runner import RunSpec


@runtime_checkable
class CandidateRunner(Protocol):
    """Runs one candidate of the script in ``spec`` and returns what a cold run would show.

    Contract (what the oracle relies on): the candidate runs as ``__main__`` in its own scratch
    copy of the script's folder, with ``spec.args``, the environment plus ``extra_env`` (the GPU it
    was given), in its own process group that is killed when the run ends; ``timeout`` and
    ``max_rss`` bound it; the Outcome carries the streams and every traceback in them. May be
    ignored by a remote implementation: ``stop_when`` (stop once the target is on screen) and the
    calling thread's cancel event (``reducer.runner.cancellable``) — both only save time. ``warm``:
    False forces a cold start (the final verdict is always a cold run)."""

    spec: RunSpec

    def run(self, source: str, *, timeout: float | None = None, extra_env: dict[str, str] | None = None,
            stop_when: Callable[[list[TracebackRecord]], bool] | None = None, max_rss: int | None = None,
            stop_grace: float = 2.0, warm: bool | None = None) -> Outcome: ...


@runtime_checkable
class WarmSlot(Protocol):
    """A warm interpreter: start (import the stack, never touching CUDA), one child per
    candidate, stop. reducer/zygote.py's ``Zygote`` is the local one."""

    def start(self) -> object: ...

    def fork(self, script: str, args: list[str], cwd: Path, env: dict[str, str], stdout_fd: int,
             stderr_fd: int) -> object: ...

    def stop(self) -> None: ...
