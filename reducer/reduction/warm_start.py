"""The warm start of a reduction: warm interpreters for the candidates' runs, if the original fails
the same way warm as it did cold.

The original was already run cold to establish the failure (reducer/failure/original.py); here it runs
once warm. A different outcome (another signature, none, another exit code, a failure of its own
more or less) means something in the warm start changes what the script does: then every run
stays cold. A clean pass of an original that failed in every run so far is first taken as
evidence of its rate (``remeasure``): then the failure is reduced as flaky and checked again.

Run by reducer/engine.py; it sets the oracle's warm bounds (``warm_timeout``, ``warm_max_rss``)
itself, from the original's warm run."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from reducer.errors import DeadlineReached
from reducer.failure.flaky import seed_calls
from reducer.failure.oracle import Oracle, candidate_memory, candidate_timeout
from reducer.failure.original import Failure, remeasure
from reducer.failure.outcome import Outcome


@dataclass
class WarmReport:
    """Whether the candidates run warm, and why not; reduction.json's ``warm``."""

    enabled: bool = False
    why_not: str = ""
    zygote: dict[str, Any] = field(default_factory=dict)
    original_warm_seconds: float | None = None
    original_cold_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "why_not": self.why_not, "zygote": self.zygote,
                "original_warm_seconds": self.original_warm_seconds,
                "original_cold_seconds": self.original_cold_seconds}

    def sentence(self) -> str:
        """One line for a person: what was imported once and what the original's runs took, or
        why the runs stay cold."""
        if not self.enabled:
            return self.why_not
        z = self.zygote
        return (f"{len(z.get('imported', []))} modules imported once ({z.get('start_seconds', 0):.1f}s); the "
                f"original ran in {self.original_warm_seconds:.1f}s warm vs {self.original_cold_seconds:.1f}s cold"
                + _children_note(z.get("children") or {})
                + (f"; left out (they initialise CUDA): {', '.join(z['dropped'])}" if z.get("dropped") else ""))


def _children_note(children: dict[str, Any]) -> str:
    warm, cold = children.get("warm", 0), children.get("cold", 0)
    if not warm and not cold:
        return ""
    note = f"; its spawned children: {warm} warm"
    if cold:
        note += f", {cold} cold ({children.get('why_cold', ['?'])[0]})" if children.get("why_cold") else f", {cold} cold"
    return note


def reference_set(failure: Failure) -> tuple[str, ...] | None:
    """The GPU set the failure was confirmed on: the warm check and the final verification use it."""
    return failure.gpu.set or None


def warm_timeout(warm_wall: float, cold_wall: float) -> float:
    """How long a warm candidate may run: three times the original's warm run, but never less
    than a quarter of its cold one (a candidate that falls back to a cold start keeps a chance)."""
    return max(candidate_timeout(warm_wall), 0.25 * cold_wall)


def warm_memory_cap(warm_peak: int, cold_peak: int) -> int | None:
    """The resident-memory cap of a warm candidate: the original's footprint, the larger of its
    warm and cold peaks. A warm run of a fast original is sampled once or twice (every
    ``_MEMORY_POLL``), often before its children were forked: a candidate that starts the same
    ranks itself (the boundary call of a job that needs its peer, ``start_processes`` in a
    fork) was killed as "heavier" in some runs and not in others. The final verification
    compares cold runs (cold_verdict.py ``heavier``), so no repro heavier than the script passes."""
    return candidate_memory(max(warm_peak, cold_peak))


def start_warm(failure: Failure, oracle: Oracle, remeasured: Callable[[Failure], None],
               say: Callable[[str], None]) -> WarmReport:
    """Warm interpreters for the runs, if the original fails the same way warm as cold.

    ``remeasured`` hears the failure once a clean warm pass made its rate be measured again (the
    caller stores it); ``say`` hears the lines of that measurement."""
    from reducer.run.zygote import ZygoteError, ZygotePool, warm_imports
    runner = failure.runner
    report = WarmReport(original_cold_seconds=round(failure.wall_time, 3))
    if runner.launched and runner.rank_plan is None:
        report.why_not = (f"run by a launch line ({failure.spec.launch.kind}) that only its launcher can run: "
                          f"its processes start their own interpreters")
        return report
    modules = warm_imports(failure.source, runner.script_dir)
    if not modules:
        report.why_not = "the script imports nothing worth importing ahead"
        return report
    pool = ZygotePool(runner.python, modules, runner.base_environment())
    runner.zygotes = pool
    cold_cap = oracle.max_rss
    try:
        pool.release(pool.start_one())
        # uncapped: the cold run's memory is no measure of a warm one (Oracle.warm_max_rss)
        oracle.max_rss = None
        verdict = oracle.test(failure.source, warm=True, gpu_set=reference_set(failure))
    except ZygoteError as e:
        report.why_not = str(e)
    except DeadlineReached:
        report.why_not = "the time limit came first"
    else:
        oracle.max_rss = cold_cap
        report.original_warm_seconds = round(verdict.outcome.wall_time, 3)
        report.zygote = pool.info.to_dict() if pool.info else {}
        report.zygote["children"] = pool.children()
        if not verdict.interesting and _first_pass(failure, verdict.outcome) and not runner.warm_fallbacks:
            measured = remeasure(failure, say)
            if measured is not None:
                # The pass was the failure's rate showing, not the warm start: it is reduced as
                # flaky, with the oracle, the stored record and a new warm check saying so.
                adopt_rate(failure, measured, oracle)
                remeasured(failure)
                oracle.max_rss = cold_cap
                pool.stop()
                runner.zygotes = None
                return start_warm(failure, oracle, remeasured, say)
        differs = warm_differs(failure, verdict.outcome)
        if runner.warm_fallbacks:
            report.why_not = "the warm interpreter died on the original"
        elif not verdict.interesting:
            report.why_not = ("the original does not fail the same way when started warm "
                              f"({_describe(verdict.outcome)})")
        elif differs:
            report.why_not = f"the original fails differently when started warm ({differs})"
        else:
            report.enabled = True
            oracle.warm_timeout = warm_timeout(verdict.outcome.wall_time, failure.wall_time)
            if cold_cap is not None:
                oracle.warm_max_rss = warm_memory_cap(verdict.outcome.peak_rss, failure.peak_rss)
            return report
    oracle.max_rss = cold_cap
    pool.stop()
    runner.zygotes = None
    return report


def _first_pass(failure: Failure, outcome: Outcome) -> bool:
    """A clean pass of an original that failed in every run so far (no seed fixed it)."""
    clean = outcome.returncode == 0 and not outcome.tracebacks and not outcome.timed_out
    return clean and failure.rate is not None and failure.rate.deterministic and failure.seed is None


def adopt_rate(failure: Failure, measured: Failure, oracle: Oracle) -> None:
    """``measured`` (reducer/failure/original.py:remeasure) is the same failure with its rate: the run in
    flight takes it (the oracle's rate and the seed every candidate keeps)."""
    failure.outcomes, failure.rate, failure.seed = measured.outcomes, measured.rate, measured.seed
    oracle.set_rate(failure.rate.value if failure.flaky else 1.0,
                    tuple(seed_calls(failure.spec.source, failure.seed)) if failure.seed is not None else ())


def warm_differs(failure: Failure, warm: Outcome) -> str:
    """Beyond the target: what the warm run of the original shows that no cold run showed, or
    lacks that every cold run showed — its spawned children's failures included (their
    tracebacks are in the output) — as one short phrase; "" when nothing differs. A warm run
    stopped once the target appeared is only checked for failures of its own."""
    from reducer.failure.ranks import PRIMARY, role
    from reducer.failure.signature import distinct_failures
    options = failure.spec.options
    # --resume trusts the stored failure: its runs kept their times, not their output, so there
    # is nothing beyond the target to compare with (the target itself was checked).
    cold = [{sig: rec for sig, rec in distinct_failures(o, options)} for o in failure.outcomes
            if o.stdout or o.stderr]
    if not cold:
        return ""
    seen_warm = {sig: rec for sig, rec in distinct_failures(warm, options)}
    union = {sig: rec for c in cold for sig, rec in c.items()}
    # Only a process's own failures are compared: a parent's report that a child failed
    # (torchrun's ChildFailedError, raised warm by reducer/run/rank_launch.py from other frames) and
    # the other ranks' failures for want of the first (a peer that closed, a SIGTERM: they come or
    # not with the timing) say nothing of what the script does warm.
    extra = [rec for sig, rec in seen_warm.items() if sig not in union and role(rec) == PRIMARY]
    missing = []
    if not (warm.stopped_early or warm.timed_out):
        missing = [rec for sig, rec in cold[0].items()
                   if all(sig in c for c in cold) and sig not in seen_warm and role(rec) == PRIMARY]
        codes = {o.returncode for o in failure.outcomes}
        if not extra and not missing and len(codes) == 1 and warm.returncode not in codes:
            return f"exit code {warm.returncode} warm, {codes.pop()} cold"
    parts = [f"also {r.exc_type}: {r.message[:60]}" for r in extra[:1]] + \
            [f"not {r.exc_type}: {r.message[:60]}" for r in missing[:1]]
    return "; ".join(parts)


def _describe(outcome: Outcome) -> str:
    if outcome.tracebacks:
        r = outcome.tracebacks[-1]
        return f"{r.exc_type}: {r.message[:80]}"
    return f"exit {outcome.returncode} without a traceback"
