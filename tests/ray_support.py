"""Shared by the Ray tests: the skip when the extra is missing, and a reduction through any
CandidateRunner that records the accepted sequence (what must agree with a local slot's)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

SKIP_WHY = ("Ray is the optional extra: pip install 'reprobot[ray]' (or pip install 'ray>=2.40') and run "
            "`pytest tests/test_ray_runner.py tests/test_ray_faults.py`")

CORPUS = Path(__file__).resolve().parents[1] / "bench" / "corpus"


def need_ray():
    return pytest.importorskip("ray", reason=SKIP_WHY)


@dataclass
class Reduced:
    best: str
    accepted: list[str]
    runs: int
    cancelled: int


def reduce_with(runner, source: str, jobs: int) -> Reduced:
    """The real oracle and search over ``runner``; the target is the original's last traceback,
    as run by the local engine."""
    from reducer.failure.oracle import Oracle
    from reducer.failure.signature import MatchOptions, signature_of
    from reducer.run.runner import Runner
    from reducer.search.driver import Reducer
    local = runner.local if hasattr(runner, "local") else runner
    assert isinstance(local, Runner)
    original = local.run(source, timeout=60)
    target = signature_of(original.tracebacks[-1], MatchOptions())
    accepted: list[str] = []
    oracle = Oracle(runner, target, MatchOptions(), timeout=60)
    result = Reducer(source, oracle, jobs=jobs, on_accept=lambda best, st: accepted.append(best)).run()
    return Reduced(result.best_source, accepted, result.stats.runs, result.stats.cancelled)


def local_result(script: Path) -> Reduced:
    from reducer.run.runner import Runner, RunSpec
    return reduce_with(Runner(RunSpec(script=script)), script.read_text(encoding="utf-8"), jobs=1)


def gone(pid: int, wait: float = 10.0) -> bool:
    """The process is dead (gone, or a zombie): a SIGKILLed one takes a moment on a loaded machine."""
    import time
    deadline = time.monotonic() + wait
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
