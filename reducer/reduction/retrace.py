"""The traced runs of a reduction (reducer/analysis/trace.py records them; reducer/analysis/boundary.py the failing
call): the original's, once before the search, and the retraces of a changed best during it.

Every traced run is pinned to a GPU set of the pool like a candidate (a traced run that saw every
GPU would not be the run the candidates make) and is warm where the candidates are. Tracing only
suggests candidates — every candidate is judged by a run of its own — so a trace that fails never
stops a reduction: the original's says why in one line, a retrace's is dropped."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from reducer.analysis.trace import TraceData, trace_run
from reducer.failure.oracle import Oracle
from reducer.failure.original import Failure
from reducer.reduction.warm_start import reference_set


def pinned_run_fn(oracle: Oracle, warm: bool | None = None, gpu_set: tuple[str, ...] | None = None):
    """reducer.analysis.trace's run function, on a GPU set of the pool like every candidate."""
    def run(source: str, launcher: list[str], env: dict[str, str]):
        with oracle.gpus.acquire(gpu_set) as slot:
            outcome = oracle.runner.run(source, launcher=launcher, extra_env={**(env or {}), **(slot.env() or {})},
                                        warm=warm)
            slot.pgid = outcome.pid
            return outcome
    return run


def trace_original(failure: Failure, oracle: Oracle, recipes: tuple[Path, ...],
                   warn: Callable[[str, str], None]) -> TraceData | None:
    """One traced run of the original (what ran, the values it saw) and one more for its boundary
    calls (the failing call's own argument values, rebuilt by ``recipes`` where no literal spells
    them); None when the trace failed. ``warn(lead, why)`` hears what was skipped."""
    try:
        # warm where the runs are (the original was just checked to fail the same way warm; the
        # launchers are scripts, so a warm interpreter runs them as it runs the retraces)
        warm = True if failure.runner.zygotes is not None else None
        run = pinned_run_fn(oracle, warm, reference_set(failure))
        data = trace_run(failure.source, run)
    except Exception as e:  # tracing is an optimisation: never let it stop a reduction
        warn("trace-guided first cut skipped:", str(e)[:200])
        return None
    try:
        from reducer.analysis.boundary import boundary_run
        data.boundary = boundary_run(failure.spec.source, run, recipes)
        data.target_exc_type = failure.signature.exc_type
    except Exception as e:  # noqa: BLE001 - an optimisation too
        warn("boundary call skipped:", str(e)[:200])
    return data


def retracer(oracle: Oracle, recipes: tuple[Path, ...]) -> Callable[[str], Any]:
    """Traced runs of a changed best, warm where candidates run warm.

    The first one also records the boundary calls (one more run): when the prelude brought a
    child's work home, the original's run never raised in its own process, so only this trace
    can hand the boundary-call candidate its failing call."""
    from reducer.analysis.boundary import boundary_run
    run = pinned_run_fn(oracle, warm=True)
    pending = [True]

    def retrace(source: str):
        data = trace_run(source, run)
        if pending:
            pending.clear()
            try:
                data.boundary = boundary_run(source, run, recipes)
                data.target_exc_type = oracle.target.exc_type
            except Exception:  # noqa: BLE001 - an optimisation: the trace stands without it
                pass
        return data
    return retrace
