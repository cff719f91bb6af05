"""Drive a reduction from the CLI, in steps: runs (warm or cold), resume, trace, search with
progress, the cold verdict on the result, and pinning the environment."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape

from bot.output import console, traceback_tail
from bot.progress import ReductionProgress
from bot.scrub import scrub
from bot.standalone import make_self_contained
from bot.targets.registry import recipe_files
from bot.store import ReproDir, record_failure, write_json_atomic, write_text_atomic
from bot.verified import record_verified, verification
from reducer.errors import DeadlineReached, ExitCode, ReprobotError
from reducer.failure import Failure, remeasure
from reducer.flaky import Rate, seed_calls
from reducer.run.gpu import GpuPool, parse_gpus
from reducer.oracle import Oracle, Verdict, candidate_memory, candidate_timeout
from reducer.outcome import Outcome, TracebackRecord
from reducer.search import Reducer, ReductionResult
from reducer.signature import find_match
from reducer.size import count_statements

# How many earlier results the cold fallback may try before going back to the original.
COLD_FALLBACK_TRIES = 6
# A reduction stopped at --max-time verifies its best result within this long past it, at least
# (four cold runs of the original when that is longer): bot/commands/reduce.py's --help says so.
VERIFY_GRACE = 60.0


@dataclass
class Options:
    jobs: int = 1
    gpus: str | None = None
    jobs_per_gpu: int = 1
    max_time: float | None = None
    deadline: float | None = None     # time.monotonic() at which the whole command stops
    resume: bool = False
    trace: bool = True
    pin_env: bool = True
    warm: bool = True
    cluster: str | None = None        # a Ray address (--cluster): the search's candidates run there
    cluster_slots: int | None = None  # slots to place on it (default: as many as its nodes hold)


@dataclass
class WarmReport:
    enabled: bool = False
    why_not: str = ""
    zygote: dict[str, Any] = field(default_factory=dict)
    original_warm_seconds: float | None = None
    original_cold_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "why_not": self.why_not, "zygote": self.zygote,
                "original_warm_seconds": self.original_warm_seconds,
                "original_cold_seconds": self.original_cold_seconds}


# ---- the pipeline --------------------------------------------------------------------------
def reduce_failure(failure: Failure, repro: ReproDir, opts: Options | None = None, **kwargs: Any) -> int:
    """Reduce ``failure`` into ``repro``; 0 when the result fails the same way cold. Stopping
    early (interrupted, time limit) or a result that only fails sometimes raises ReprobotError,
    with the best result so far saved."""
    opts = opts or Options(**kwargs)
    if opts.resume and finished(repro):
        return 0
    pool = gpu_pool(opts, failure)
    oracle = make_oracle(failure, pool, command_deadline(opts))
    try:
        return _reduce(failure, repro, opts, pool, oracle)
    finally:
        if failure.runner.zygotes is not None:
            failure.runner.zygotes.stop()


def _reduce(failure: Failure, repro: ReproDir, opts: Options, pool: GpuPool, oracle: Oracle) -> int:
    stop_leftovers()
    try:
        start_source, seen, stats = resume(repro, oracle, opts)
    except DeadlineReached:
        raise time_limit(repro)
    warm = warm_up(failure, oracle, opts, repro)
    trace = trace_data(failure, repro, start_source is not None, oracle) if opts.trace else None
    saver = Saver(repro, oracle, pool, warm, opts.jobs)
    saver.plan = failure.gpu
    max_time = None if oracle.deadline is None else max(0.0, oracle.deadline - time.monotonic())
    opts.max_time = max_time
    if opts.cluster:
        from bot.cluster import on_cluster
        saver.cluster = {"address": opts.cluster}
        with on_cluster(opts.cluster, failure, oracle, pool, opts.cluster_slots, warm.enabled, saver.cluster) as slots:
            if slots:
                opts.jobs = saver.jobs = slots
            result = search(start_source or failure.source, oracle, opts, trace, seen, stats, saver,
                            failure.spec.script, failure.record.message)
    else:
        result = search(start_source or failure.source, oracle, opts, trace, seen, stats, saver,
                        failure.spec.script, failure.record.message)
    stopped = save_search(failure, repro, result, saver)
    if stopped:
        # stopped at --max-time: the best result so far is verified like a finished one, within
        # a stated grace, so the folder and the draft read the repro's own run
        oracle.deadline = time.monotonic() + verify_grace(failure)
    try:
        best, record, outcome = confirm_cold(failure, repro, oracle, result, saver)
        # the final word: repro.py alone in an empty folder, offline (bot/standalone.py)
        best, record = make_self_contained(failure, repro, oracle, best, record)
    except DeadlineReached:
        # the search ended, its cold check did not (a DDP script's cold run can take a minute):
        # the same one-line stop as at the limit mid-search, never a traceback
        saver(result.best_source, {**result.stats.to_dict(), "verified": None}, "stopped: time limit", result.seen)
        if opts.pin_env:
            # the environment does not wait on the verdict: pinned within PIN_GRACE as for a
            # verified result, so an unverified stop still says what it failed in
            capture_environment(failure, repro, oracle)
        raise time_limit(repro, result) from None
    write_text_atomic(repro.traceback_txt, record.text + "\n")
    record_repro_run(repro, record, outcome, failure)
    # the repro.py this cold check verified: `file --submit` files no other (bot/verified.py)
    record_verified(repro, best)
    try:
        flaky_line = confirm_rate(failure, repro, oracle, best)
    except DeadlineReached:
        # a stopped reduction's grace ran out measuring the self-contained repro's rate: the
        # cold check above stands; the rate is the original's, said as such
        flaky_line = unmeasured_rate(failure, repro)
    if opts.pin_env:
        capture_environment(failure, repro, oracle)
    print_reduced(repro, result, best, record)
    if flaky_line:
        console.print(f"[yellow]{escape(flaky_line)}[/]")
    if stopped:
        raise time_limit(repro, result, verified=True)
    return 0


def verify_grace(failure: Failure) -> float:
    """How long past --max-time a stopped reduction's best result may take to be verified cold
    (--help states it): four cold runs of the original, and at least VERIFY_GRACE seconds."""
    return max(VERIFY_GRACE, 4 * failure.wall_time)


def confirm_rate(failure: Failure, repro: ReproDir, oracle: Oracle, best: str) -> str | None:
    """A flaky original's repro, measured cold as many times as the original was (the final
    verification already did unless the self-contained step changed it); both rates go into
    reduction.json and the draft states the repro's, never a deterministic-looking result. A
    seeded one says which seed made it deterministic."""
    rate = failure.rate
    if rate is None or (rate.deterministic and failure.seed is None):
        return None
    data = repro.read_json(repro.reduction_json) if repro.reduction_json.is_file() else {}
    if failure.seed is not None:
        line = (f"deterministic with seed {failure.seed}: the original {rate.words()}; with random seed "
                f"{failure.seed} fixed (the repro's first line) it fails every time")
        write_json_atomic(repro.reduction_json, {**data, "flaky": {"original": rate.to_dict(), "seed": failure.seed,
                                                                   "sentence": line}})
        return line
    after = MEASURED.get(best)
    if after is None:
        after = cold_rate(failure, oracle, best)[0]
    line = f"flaky: the repro {after.words()} (the original {rate.words()})"
    write_json_atomic(repro.reduction_json, {**data, "flaky": {"original": rate.to_dict(), "repro": after.to_dict(),
                                                               "sentence": line}})
    return line


def unmeasured_rate(failure: Failure, repro: ReproDir) -> str:
    """A flaky failure whose repro's rate the time limit left unmeasured: reduction.json and the
    line say the original's rate only."""
    rate = failure.rate
    assert rate is not None
    line = f"flaky: the original {rate.words()}; the repro's own rate was not measured before the time limit"
    data = repro.read_json(repro.reduction_json) if repro.reduction_json.is_file() else {}
    write_json_atomic(repro.reduction_json, {**data, "flaky": {"original": rate.to_dict(), "sentence": line}})
    return line


# The repro rates the final verification measured, by source (confirm_rate states them).
MEASURED: dict[str, Rate] = {}


def cold_rate(failure: Failure, oracle: Oracle,
              source: str) -> tuple[Rate, TracebackRecord | None, Outcome | None, Outcome]:
    """A flaky failure's final verification: the result run cold, one run after another, as many
    times as the original was measured, so its rate is known as well as the original's. By the
    oracle's rule, a different failure or a hang stops it at once (the original only ever failed
    this way or passed cleanly); the rate, the target's record and the run that showed it (None
    when no run did), and the last run."""
    assert failure.rate is not None
    hits, record, shown, last = 0, None, None, None
    n = 0
    for n in range(1, max(failure.rate.runs, 1) + 1):
        last = oracle._test_once(source, False, reference_set(failure), None, False).outcome
        match = find_match(last.tracebacks, failure.signature, failure.spec.options,
                           as_itself=failure.as_itself, raised=failure.raised)
        if match is not None and not (last.timed_out and not failure.hangs):
            hits += 1
            if record is None:
                record, shown = match, last
        elif last.tracebacks or last.timed_out or last.returncode != 0:
            return Rate(hits, n), None, None, last
    rate = Rate(hits, n)
    MEASURED[source] = rate
    return rate, record, shown, last  # type: ignore[return-value]


# ---- steps ---------------------------------------------------------------------------------
def gpu_pool(opts: Options, failure: Failure | None = None) -> GpuPool:
    """Disjoint GPU sets of as many GPUs as the original used (failure.gpu.per_job); the first is
    the set the failure was confirmed on."""
    plan = failure.gpu if failure is not None else None
    gpus = failure.spec.gpus if failure is not None and failure.spec.gpus is not None else parse_gpus(opts.gpus)
    pool = GpuPool(gpus, per_gpu=opts.jobs_per_gpu, per_job=plan.per_job if plan else 1)
    if plan is not None and plan.set and pool.sets and pool.sets[0] != plan.set:
        raise ReprobotError(f"GPU set {plan.set} of the confirmation runs is not the pool's first set "
                            f"{pool.sets[0]}", ExitCode.USAGE)
    if plan is not None and plan.per_job > 1:
        console.print(f"GPU sets of {plan.per_job} per job ({plan.source}): "
                      + ", ".join("{" + ",".join(s) + "}" for s in pool.sets)
                      + (f"; needs {plan.needs_gpus} GPUs: on one it {plan.one_gpu}" if plan.needs_gpus else
                         ("; it fails the same way on one GPU" if plan.one_gpu else "")))
    if len(pool) and opts.jobs > pool.slots:
        console.print(f"[yellow]--jobs {opts.jobs} > {pool.slots} GPU slots: candidates queue for a free GPU "
                      f"(--jobs-per-gpu lets small candidates share one)[/]")
    return pool


def reference_set(failure: Failure) -> tuple[str, ...] | None:
    """The GPU set the failure was confirmed on: the warm check and the final verification use it."""
    return failure.gpu.set or None


def command_deadline(opts: Options) -> float | None:
    """When the whole command stops (time.monotonic()): given by the caller, else --max-time from now."""
    if opts.deadline is None and opts.max_time is not None:
        return time.monotonic() + opts.max_time
    return opts.deadline


def warm_timeout(warm_wall: float, cold_wall: float) -> float:
    """How long a warm candidate may run: three times the original's warm run, but never less
    than a quarter of its cold one (a candidate that falls back to a cold start keeps a chance)."""
    return max(candidate_timeout(warm_wall), 0.25 * cold_wall)


def make_oracle(failure: Failure, pool: GpuPool, deadline: float | None) -> Oracle:
    oracle = Oracle(failure.runner, failure.signature, failure.spec.options,
                    timeout=candidate_timeout(failure.wall_time), gpus=pool,
                    max_rss=candidate_memory(failure.peak_rss), allow_hang=failure.hangs,
                    stop_grace=max(2.0, 0.25 * failure.wall_time), as_itself=failure.as_itself, raised=failure.raised,
                    rate=failure.rate.value if failure.flaky else 1.0,
                    required=tuple(seed_calls(failure.spec.source, failure.seed)) if failure.seed is not None else ())
    oracle.deadline = deadline
    oracle.reference_set = reference_set(failure)
    return oracle


def stop_leftovers() -> None:
    from reducer.run.runner import reap_leftovers
    left = reap_leftovers()
    if left:
        console.print(f"[yellow]stopped {left} process(es) an earlier, killed reprobot had left running[/]")


def warm_up(failure: Failure, oracle: Oracle, opts: Options, repro: ReproDir | None = None) -> WarmReport:
    """Warm runs if --cold does not forbid them and the original allows them; says which it is."""
    warm = start_warm(failure, oracle, repro) if opts.warm else WarmReport(why_not="--cold")
    if warm.enabled:
        z = warm.zygote
        console.print(f"warm start: {len(z.get('imported', []))} modules imported once "
                      f"({z.get('start_seconds', 0):.1f}s); the original ran in {warm.original_warm_seconds:.1f}s "
                      f"warm vs {warm.original_cold_seconds:.1f}s cold"
                      + _children_note(z.get("children") or {})
                      + (f"; left out (they initialise CUDA): {', '.join(z['dropped'])}" if z.get("dropped") else ""))
    elif opts.warm:
        console.print(f"[yellow]cold runs:[/] {escape(warm.why_not)}")
    return warm


def _children_note(children: dict[str, Any]) -> str:
    warm, cold = children.get("warm", 0), children.get("cold", 0)
    if not warm and not cold:
        return ""
    note = f"; its spawned children: {warm} warm"
    if cold:
        note += f", {cold} cold ({children.get('why_cold', ['?'])[0]})" if children.get("why_cold") else f", {cold} cold"
    return note


def start_warm(failure: Failure, oracle: Oracle, repro: ReproDir | None = None) -> WarmReport:
    """Warm interpreters for the runs, if the original fails the same way warm as cold.

    The original was already run cold to establish the failure; here it runs once warm. A
    different outcome (another signature, or none) means something in the warm start changes
    what the script does: then every run stays cold."""
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
            measured = remeasure(failure, lambda m: console.print(f"[dim]{escape(m)}[/]"))
            if measured is not None:
                # The pass was the failure's rate showing, not the warm start: it is reduced as
                # flaky, with the oracle, the stored record and a new warm check saying so.
                adopt_rate(failure, measured, oracle, repro)
                oracle.max_rss = cold_cap
                pool.stop()
                runner.zygotes = None
                return start_warm(failure, oracle, repro)
        differs = _warm_differs(failure, verdict.outcome)
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
                oracle.warm_max_rss = candidate_memory(verdict.outcome.peak_rss)
            return report
    oracle.max_rss = cold_cap
    pool.stop()
    runner.zygotes = None
    return report


def _first_pass(failure: Failure, outcome) -> bool:
    """A clean pass of an original that failed in every run so far (no seed fixed it)."""
    clean = outcome.returncode == 0 and not outcome.tracebacks and not outcome.timed_out
    return clean and failure.rate is not None and failure.rate.deterministic and failure.seed is None


def adopt_rate(failure: Failure, measured: Failure, oracle: Oracle, repro: ReproDir | None) -> None:
    """``measured`` (reducer/failure.py:remeasure) is the same failure with its rate: the run in
    flight takes it (the oracle's rate and the seed every candidate keeps) and the folder's
    signature.json, original.py and seeded.py say it."""
    failure.outcomes, failure.rate, failure.seed = measured.outcomes, measured.rate, measured.seed
    oracle.set_rate(failure.rate.value if failure.flaky else 1.0,
                    tuple(seed_calls(failure.spec.source, failure.seed)) if failure.seed is not None else ())
    if repro is not None:
        record_failure(failure, repro.path.parent)


def _warm_differs(failure: Failure, warm) -> str:
    """Beyond the target: what the warm run of the original shows that no cold run showed, or
    lacks that every cold run showed — its spawned children's failures included (their
    tracebacks are in the output) — as one short phrase; "" when nothing differs. A warm run
    stopped once the target appeared is only checked for failures of its own."""
    from reducer.ranks import PRIMARY, role
    from reducer.signature import distinct_failures
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


def _describe(outcome) -> str:
    if outcome.tracebacks:
        r = outcome.tracebacks[-1]
        return f"{r.exc_type}: {r.message[:80]}"
    return f"exit {outcome.returncode} without a traceback"


def finished(repro: ReproDir) -> bool:
    """A reduction that reached its fixpoint and was confirmed cold has nothing to resume: say so
    rather than spend the GPU time of a second search that can only end where this one did. A
    repro.py that is not the one it verified (edited since, or a folder from before the digest)
    is not finished: --resume starts again from the original, with the runs it already made."""
    if not repro.reduction_json.is_file() or not repro.repro.is_file():
        return False
    saved = repro.read_json(repro.reduction_json)
    if saved.get("status") != "done":
        return False
    if not verification(repro).ok:
        console.print("[yellow]repro.py is not the one the reduction verified: reducing again from the original "
                      "(the runs already made are reused)[/]")
        return False
    n = saved.get("statements_after")
    console.print(f"{repro.path} is already reduced (repro.py" + (f", {n} statements" if n is not None else "")
                  + "): nothing to resume; run without --resume to reduce it again")
    return True


def resume(repro: ReproDir, oracle: Oracle,
           opts: Options) -> tuple[str | None, dict[str, bool], dict[str, Any] | None]:
    """Where the search starts, its seen-set and stats: with --resume, what an interrupted run
    left (one cold check of repro.py); else the original, from scratch."""
    if not opts.resume or not repro.reduction_json.is_file():
        return None, {}, None
    saved = repro.read_json(repro.reduction_json)
    seen = dict(saved.pop("seen", {}) or {})
    if saved.get("status") == "done":      # done, but repro.py is gone: again from the original
        return None, seen, None
    best = repro.repro.read_text(encoding="utf-8") if repro.repro.is_file() else None
    if best is not None and not oracle.test(best, warm=False, gpu_set=oracle.reference_set).interesting:
        console.print("[yellow]repro.py no longer fails the same way here: starting again from the original "
                      "(the cache of earlier runs is kept)[/]")
        best = None
    if best is not None:
        console.print(f"resuming from repro.py ({count_statements(best)} statements)")
    return best, seen, saved


def pinned_run_fn(oracle: Oracle, warm: bool | None = None, gpu_set: tuple[str, ...] | None = None):
    """reducer.trace's run function, on a GPU set of the pool like every candidate (a traced run
    that saw every GPU would not be the run the candidates make)."""
    def run(source: str, launcher: list[str], env: dict[str, str]):
        with oracle.gpus.acquire(gpu_set) as slot:
            outcome = oracle.runner.run(source, launcher=launcher, extra_env={**(env or {}), **(slot.env() or {})},
                                        warm=warm)
            slot.pgid = outcome.pid
            return outcome
    return run


def trace_data(failure: Failure, repro: ReproDir, resumed: bool, oracle: Oracle | None = None):
    from reducer.trace import TraceData, runner_run_fn, trace_run
    trace_file = repro.path / "trace.json"
    if resumed and trace_file.is_file():
        return TraceData.from_dict(failure.source, repro.read_json(trace_file))
    try:
        # warm where the runs are (the original was just checked to fail the same way warm; the
        # launchers are scripts, so a warm interpreter runs them as it runs the retraces)
        warm = True if failure.runner.zygotes is not None else None
        run = runner_run_fn(failure.runner, warm) if oracle is None else pinned_run_fn(oracle, warm, reference_set(failure))
        data = trace_run(failure.source, run)
    except Exception as e:  # tracing is an optimisation: never let it stop a reduction
        console.print(f"[yellow]trace-guided first cut skipped:[/] {escape(str(e))[:200]}")
        return None
    try:
        # the failing call's own argument values, for the boundary-call candidate (one more run)
        from reducer.boundary import boundary_run
        data.boundary = boundary_run(failure.spec.source, run, recipe_files())
        data.target_exc_type = failure.signature.exc_type
    except Exception as e:  # noqa: BLE001 - an optimisation too
        console.print(f"[yellow]boundary call skipped:[/] {escape(str(e))[:200]}")
    if data is not None:
        # kept (scrubbed) so that --resume still has the recorded values and dispatch targets
        write_text_atomic(trace_file, scrub(json.dumps(data.to_dict())).text)
    return data


def retracer(oracle: Oracle):
    """Traced runs of a changed best, warm where candidates run warm: they only suggest
    candidates, and every candidate is then judged by a run of its own.

    The first one also records the boundary calls (one more run): when the prelude brought a
    child's work home, the original's run never raised in its own process, so only this trace
    can hand the boundary-call candidate its failing call."""
    from reducer.boundary import boundary_run
    from reducer.trace import trace_run
    run = pinned_run_fn(oracle, warm=True)
    pending = [True]

    def retrace(source: str):
        data = trace_run(source, run)
        if pending:
            pending.clear()
            try:
                data.boundary = boundary_run(source, run, recipe_files())
                data.target_exc_type = oracle.target.exc_type
            except Exception:  # noqa: BLE001 - an optimisation: the trace stands without it
                pass
        return data
    return retrace


class Saver:
    """repro.py and reduction.json after every accepted step, and the history of accepted
    results (the cold fallback walks it back)."""

    def __init__(self, repro: ReproDir, oracle: Oracle, pool: GpuPool, warm: WarmReport, jobs: int) -> None:
        self.repro, self.oracle, self.pool, self.warm, self.jobs = repro, oracle, pool, warm, jobs
        self.reducer: Reducer | None = None
        self.plan = None      # the failure's GpuPlan, for reduction.json
        self.history: list[str] = []
        self.started = time.monotonic()
        self.cluster: dict[str, Any] | None = None   # --cluster: where the candidates ran

    def __call__(self, best: str, stats: dict[str, Any], status: str | None = None,
                 seen: dict[str, bool] | None = None) -> None:
        if not self.history or self.history[-1] != best:
            self.history.append(best)
        # repro.py stays exactly what ran: it must run and resume as it is.
        write_text_atomic(self.repro.repro, best)
        data = dict(stats)
        if status:
            data["status"] = status
        data["seen"] = seen if seen is not None else (self.reducer.seen if self.reducer else {})
        data["gpus"] = self.pool.gpus
        data["gpu_sets"] = [list(s) for s in self.pool.sets]
        if self.plan is not None:
            data["gpus_per_job"] = self.plan.per_job
            data["gpu_plan"] = self.plan.to_dict()
            data["needs_gpus"] = self.plan.needs_gpus
        data["gpu_not_released"] = self.pool.unreleased
        if self.cluster is not None:
            data["cluster"] = self.cluster
        data["oracle_run_seconds"] = round(self.oracle.run_seconds, 3)
        # processes run (a flaky failure's candidates take several each; "runs" counts verdicts)
        data["oracle_runs"] = self.oracle.runs
        runner = self.oracle.runner
        data["warm"] = {**self.warm.to_dict(), "runs_warm": runner.warm_runs, "warm_fallbacks": runner.warm_fallbacks}
        if runner.zygotes is not None:      # spawn / forkserver children of the warm runs
            data["warm"]["children"] = runner.zygotes.children()
        elapsed = max(time.monotonic() - self.started, 1e-6)
        # busy run-seconds over what the slots could have run in this session
        data["slot_utilisation"] = round(min(1.0, self.oracle.run_seconds / (self.jobs * elapsed)), 3)
        write_json_atomic(self.repro.reduction_json, data)


def search(source: str, oracle: Oracle, opts: Options, trace, seen, stats, saver: Saver,
           script: Path, failure_message: str = "") -> ReductionResult:
    reducer = Reducer(source, oracle, jobs=opts.jobs, max_time=opts.max_time, trace=trace,
                      seen=seen, stats=stats, on_accept=lambda best, st: saver(best, st),
                      failure_message=failure_message, retrace=retracer(oracle) if trace is not None else None)
    saver.reducer = reducer
    saver(source, reducer.stats.to_dict(), "running")
    with ReductionProgress(console, max(reducer.best_size.tokens, 1)) as progress:
        reducer.on_progress = progress.update
        return reducer.run()


def save_search(failure: Failure, repro: ReproDir, result: ReductionResult, saver: Saver) -> bool:
    """reduction.json with how the search ended; True when it stopped at the time limit (the
    best result so far is then verified before the command stops). Interrupted, the command
    stops here: the best result so far is saved and --resume continues from it."""
    status = result.stats.status
    if status == "interrupted":
        saver(result.best_source, result.stats.to_dict(), status, result.seen)
        console.print(f"[yellow]interrupted:[/] best so far kept in {repro.repro}; "
                      f"`reprobot reduce {failure.spec.script} --resume` continues")
        raise ReprobotError("interrupted; the best result so far is saved", ExitCode.INTERRUPTED)
    if status == "timeout":
        saver(result.best_source, result.stats.to_dict(), "stopped: time limit", result.seen)
        return True
    saver(result.best_source, result.stats.to_dict(), status, result.seen)
    return False


def keeps_needing_gpus(failure: Failure, oracle: Oracle, source: str) -> bool:
    """A failure that needs its GPU set (failure.gpu.needs_gpus) must still not fail the same way
    on the set's first GPU alone, and must not hang there where the original did not."""
    if not failure.gpu.needs_gpus:
        return True
    verdict = oracle.test(source, warm=False, gpu_set=reference_set(failure), gpu_count=1)
    if find_match(verdict.outcome.tracebacks, failure.signature, failure.spec.options,
                  raised=failure.raised) is not None:
        return False
    return failure.gpu.one_gpu_hangs or not verdict.outcome.timed_out


def cold_verdict(failure: Failure, oracle: Oracle, result: ReductionResult,
                 saver: Saver) -> tuple[str, TracebackRecord | None, Outcome | None]:
    """The final word comes from a cold run in a clean directory, on the GPU set the failure was
    confirmed on. If the result only fails warm, is heavier than the original (a default-sized
    model brought back), or no longer needs its GPU set (it fails the same way on one GPU), walk
    back to the newest earlier result that passes all three."""
    lost: list[str] = []

    def fails_cold(source: str) -> tuple[TracebackRecord | None, Outcome]:
        if failure.flaky:
            # one cold run of a 50%-flaky result fails half the time: its rate is measured instead
            rate, record, shown, last = cold_rate(failure, oracle, source)
            if record is None:
                return None, last
            verdict = Verdict(True, shown)  # type: ignore[arg-type]
        else:
            verdict = oracle.test(source, warm=False, gpu_set=reference_set(failure))
        record = find_match(verdict.outcome.tracebacks, failure.signature, failure.spec.options,
                            as_itself=failure.as_itself, raised=failure.raised)
        if record is not None and heavier(verdict.outcome, failure):
            return None, verdict.outcome
        if record is not None and not keeps_needing_gpus(failure, oracle, source):
            lost.append(source)
            return None, verdict.outcome
        return record, verdict.outcome

    record, outcome = fails_cold(result.best_source)
    if record is not None or (oracle.runner.zygotes is None and not lost and not heavier(outcome, failure)):
        return result.best_source, record, outcome
    if lost:
        console.print(f"[yellow]the result fails the same way on one GPU too (the original needs "
                      f"{failure.gpu.needs_gpus}): going back to the last result that needs them[/]")
    elif heavier(outcome, failure):
        console.print("[yellow]the result is heavier than the original: going back to the last result that "
                      "is not[/]")
    else:
        console.print("[yellow]the result " + (f"did not fail the same way in {failure.rate.runs} cold runs"
                                               if failure.flaky else "fails warm but not cold")
                      + ": going back to the last result that fails cold[/]")
    for source in list(reversed(saver.history[:-1]))[:COLD_FALLBACK_TRIES]:
        record, outcome = fails_cold(source)
        if record is not None:
            return source, record, outcome
    # The original was confirmed on the set, and checked on one GPU, by find_failure.
    if lost and failure.gpu.needs_gpus:
        return failure.source, failure.record, failure.outcomes[0]
    return failure.source, None, None


def heavier(outcome: Outcome, failure: Failure) -> bool:
    """More resident memory than the original's heaviest confirmation run, past the sampling's
    noise (the same script measured twice differs by a few MB)."""
    original = max((o.peak_rss for o in failure.outcomes), default=0)
    return original > 0 and outcome.peak_rss > original + max(original // 10, 32 * 1024 ** 2)


def confirm_cold(failure: Failure, repro: ReproDir, oracle: Oracle, result: ReductionResult,
                 saver: Saver) -> tuple[str, TracebackRecord, Outcome]:
    """The result to keep and its cold traceback; one that never fails cold is flaky."""
    best, record, outcome = cold_verdict(failure, oracle, result, saver)
    if record is None:
        raise ReprobotError(f"the reduced script did not fail the same way when re-run in a clean "
                            f"directory (flaky?): kept in {repro.repro}", ExitCode.FLAKY)
    if best != result.best_source:
        status = "stopped: time limit" if result.stats.status == "timeout" else "done"
        saver(best, {**result.stats.to_dict(), "cold_fallback": True}, status, result.seen)
        console.print(f"[yellow]kept the last result that fails cold" +
                      (f" and still needs {failure.gpu.needs_gpus} GPUs" if failure.gpu.needs_gpus else "") +
                      f" ({count_statements(best)} statements); run again with --resume --cold to continue from it[/]")
    return best, record, outcome  # type: ignore[return-value]


def record_repro_run(repro: ReproDir, record: TracebackRecord, outcome: Outcome, failure: Failure) -> None:
    """The repro's own cold traceback and what its run cost, next to the original's: routing,
    cross-links and mentions come from the repro's run, never from frames only the original went
    through; the draft can say the repro is lighter than the script."""
    data = repro.read_json(repro.reduction_json) if repro.reduction_json.is_file() else {}
    first = failure.outcomes[0]
    cost = {"repro": {"peak_rss": outcome.peak_rss, "wall_time": round(outcome.wall_time, 2)},
            "original": {"peak_rss": max(o.peak_rss for o in failure.outcomes), "wall_time": round(first.wall_time, 2)}}
    if isinstance(data, dict):
        write_json_atomic(repro.reduction_json, {**data, "repro_record": record.to_dict(), "cost": cost})


def print_reduced(repro: ReproDir, result: ReductionResult, best: str, record: TracebackRecord) -> None:
    st = result.stats
    console.print(f"[bold green]reduced[/] {st.statements_before} → {count_statements(best)} statements, "
                  f"{st.size_before.get('tokens')} → {st.size_after.get('tokens')} tokens "
                  f"in {st.runs} runs ({st.cache_hits} cache hits), {st.wall_time:.1f}s"
                  + (f" [{st.status}]" if st.status != "done" else ""))
    console.print(f"repro: [bold]{escape(str(repro.repro))}[/]")
    console.print(escape(traceback_tail(scrub(record.text).text, 6)))


def time_limit(repro: ReproDir, result: ReductionResult | None = None, verified: bool = False) -> ReprobotError:
    """Say where the best result so far is, and whether it was verified; the error to stop the
    command with."""
    size = f" ({result.stats.statements_after} statements)" if result else ""
    how = "verified cold, " if verified else "not verified (`--resume` verifies it), " if result else ""
    console.print(f"[yellow]stopped at the time limit[/]; the best result so far{size}, {how}is in {repro.repro}; "
                  f"run again with --resume to continue")
    return ReprobotError("stopped at the time limit; run again with --resume to continue", ExitCode.TIME_LIMIT)


def capture_environment(failure: Failure, repro: ReproDir, oracle: Oracle) -> None:
    """env.json and the lockfile, from the user's interpreter; a failure here is reported, not
    fatal. The repro's own run (to learn what it imports) gets one candidate's timeout; the
    whole step, what is left of --max-time plus PIN_GRACE."""
    from bot.env.lockfile import PIN_GRACE
    started = time.monotonic()
    left = None if oracle.deadline is None else oracle.deadline + PIN_GRACE - started
    if left is not None and left < 5.0:
        console.print(f"[yellow]environment not pinned:[/] --max-time reached; "
                      f"`reprobot env {escape(str(repro.path))}` pins it")
        return

    def bounded(seconds: float) -> float:
        return seconds if left is None else max(1.0, min(seconds, left - (time.monotonic() - started)))
    try:
        from bot.env.probe import DEFAULT_TIMEOUT, write_env
        write_env(repro, failure.runner.python, timeout=bounded(DEFAULT_TIMEOUT))
    except ReprobotError as e:
        console.print(f"[yellow]environment not captured:[/] {escape(e.message)}")
        return
    try:
        from bot.env.lockfile import LOCK_TIMEOUT, write_lock
        write_lock(repro, failure.runner.python, None, timeout=bounded(LOCK_TIMEOUT),
                   run_timeout=bounded(oracle.timeout or LOCK_TIMEOUT))
    except ReprobotError as e:
        console.print(f"[yellow]lockfile not written:[/] {escape(e.message)}")
    console.print(f"environment pinned in {time.monotonic() - started:.1f}s "
                  f"({repro.env_json.name}, {repro.requirements_lock.name})")
