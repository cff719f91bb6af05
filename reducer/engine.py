"""One whole reduction, from a found failure to a verified result: the engine's entry.

    from reducer.engine import Options, reduce
    failure = find_failure(FailureSpec(script=path, source=path.read_text(), python=sys.executable))
    result = reduce(failure, Options(jobs=2, max_time=600), listener)
    result.stopped          # why it ended: DONE, TIME_LIMIT, INTERRUPTED, UNVERIFIED, NO_SEARCH, NOT_COLD
    result.best             # the repro (for DONE and TIME_LIMIT: it failed the same way cold)
    result.record           # its traceback record from that run (None: not verified)

In order: the GPU sets and the oracle; a resumed start checked cold before it is trusted; the warm
start (reducer/reduction/warm_start.py); the traced runs of the original (reducer/reduction/retrace.py); the search
(reducer/search/driver.py), its candidates on a Ray cluster with ``Options.cluster``
(reducer/cluster/session.py); then the final word (reducer/reduction/cold_verdict.py): the cold verdict and
the walk back to an earlier result, the self-contained step, and a flaky failure's repro rate.
A search stopped at the time limit is verified like a finished one, within ``verify_grace``.

It never prints and never writes a folder: what a person should hear and what a caller keeps goes
through the ``Listener`` it is handed. What only its caller knows comes in ``Options`` as plain
values: the targets' value-recipe files, a test for private text, where a resume starts.
"""
from __future__ import annotations

import time
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from reducer.analysis.size import count_statements
from reducer.analysis.trace import TraceData
from reducer.errors import DeadlineReached, ExitCode, ReprobotError
from reducer.failure.flaky import Rate, seed_calls
from reducer.failure.oracle import Oracle, candidate_memory, candidate_timeout
from reducer.failure.original import Failure
from reducer.failure.outcome import Outcome, TracebackRecord
from reducer.reduction.cold_verdict import cold_verdict, repro_rate, self_contained, unmeasured_rate
from reducer.reduction.retrace import retracer, trace_original
from reducer.reduction.standalone import Standalone
from reducer.reduction.warm_start import WarmReport, reference_set, start_warm
from reducer.run.gpu import GpuPool, parse_gpus
from reducer.search.driver import Reducer
from reducer.search.loop import Progress, ReductionResult

# A reduction stopped at the time limit verifies its best result within this long past it, at
# least (four cold runs of the original when that is longer): `reduce --help` says so.
VERIFY_GRACE = 60.0

# Why a reduction ended (Reduction.stopped).
DONE = "done"                                   # the search's fixpoint, verified
TIME_LIMIT = "time limit"                       # the search stopped at the limit; its best verified in the grace
INTERRUPTED = "interrupted"                     # Ctrl-C in the search: its best so far, not verified
UNVERIFIED = "time limit, unverified"           # the grace ran out in the cold check
NO_SEARCH = "time limit, before the search"     # the resumed start's cold check met the limit
NOT_COLD = "not cold"                           # nothing the search kept fails the same way cold (flaky?)


@dataclass
class Options:
    """What a reduction may use and where it starts."""

    jobs: int = 1
    gpus: str | None = None            # --gpus, when the failure's spec names none
    jobs_per_gpu: int = 1
    max_time: float | None = None      # seconds from now, when no deadline is given
    deadline: float | None = None      # time.monotonic() at which the whole command stops
    trace: bool = True                 # the traced runs (the trace-guided first cut, the boundary call)
    warm: bool = True                  # False: every run cold (--cold)
    cluster: str | None = None         # a Ray address: the search's candidates run there
    cluster_slots: int | None = None   # slots to place on it (default: as many as its nodes hold)
    # A resumed reduction: its best so far (checked cold before it is trusted), the search's
    # seen-set and stats, and the original's stored trace (TraceData.to_dict()), used only when
    # the start stands.
    start: str | None = None
    seen: dict[str, bool] = field(default_factory=dict)
    stats: dict[str, Any] | None = None
    stored_trace: dict[str, Any] | None = None
    # What only the caller knows: the value-recipe files of the targets (reducer/analysis/recipes.py), most
    # specific first, and which text must never be written into the repro (a scrubber's finding).
    recipes: tuple[Path, ...] = ()
    private: Callable[[str], bool] = lambda _text: False


@dataclass(frozen=True)
class Note:
    """A line for the person running the reduction. ``level``: "info", "warn" (something they
    should know: a step skipped, a result walked back) or "detail" (a step of a measurement).
    ``lead``: the words to stress, said before ``text``."""

    text: str
    level: str = "info"
    lead: str = ""


class Listener(Protocol):
    """What the engine tells its caller while it reduces; the caller prints and keeps.

    Contract: every method is called from the thread that called ``reduce``, in the order the
    events happen (but for ``note``s of a cluster's slots, which its own threads may send), and
    returns nothing the engine reads — a caller cannot change the reduction,
    only report and store it. ``accepted`` comes after every accepted step and at each change of
    the search's status (``figures["status"]``: running, done, interrupted, stopped: time
    limit), with the figures of reduction.json (``seen`` included); saving both is what lets a
    later ``Options.start``/``seen``/``stats`` resume. ``traced`` hands over the original's trace
    (it holds the script's values: scrub what is stored). ``remeasured``: a clean warm pass made
    the failure's rate be measured again; the same ``failure`` object now carries it (store it).
    ``verified``: the result passed its cold check and the self-contained step (``stopped`` is
    still DONE or TIME_LIMIT, ``flaky`` not yet measured): keep it before the rate's runs.
    ``searching(start_tokens)`` is entered for the search itself (``start_tokens``: the size it
    starts from); ``progress`` comes inside it, after every run and at every pass change."""

    def note(self, note: Note) -> None: ...

    def searching(self, start_tokens: int) -> AbstractContextManager[None]: ...

    def progress(self, progress: Progress) -> None: ...

    def accepted(self, best: str, figures: dict[str, Any]) -> None: ...

    def traced(self, trace: dict[str, Any]) -> None: ...

    def remeasured(self, failure: Failure) -> None: ...

    def verified(self, result: "Reduction") -> None: ...


class Quiet:
    """A Listener that keeps nothing: the engine used alone."""

    def note(self, note: Note) -> None:
        pass

    @contextmanager
    def searching(self, start_tokens: int) -> Iterator[None]:
        yield

    def progress(self, progress: Progress) -> None:
        pass

    def accepted(self, best: str, figures: dict[str, Any]) -> None:
        pass

    def traced(self, trace: dict[str, Any]) -> None:
        pass

    def remeasured(self, failure: Failure) -> None:
        pass

    def verified(self, result: "Reduction") -> None:
        pass


@dataclass
class Reduction:
    """What a reduction ended with."""

    stopped: str                               # DONE, TIME_LIMIT, INTERRUPTED, UNVERIFIED, NO_SEARCH, NOT_COLD
    best: str                                  # the source to keep
    record: TracebackRecord | None = None      # its verifying run's record (alone, when it failed alone)
    outcome: Outcome | None = None             # the cold run that verified it
    search: ReductionResult | None = None      # the search's own result (None: it never ran)
    warm: WarmReport = field(default_factory=WarmReport)
    verification: Standalone | None = None     # the self-contained step: how it was verified, what it needs
    cold_fallback: bool = False                # walked back to an earlier result
    cost: dict[str, Any] | None = None         # the repro's run against the original's (memory, time)
    flaky: dict[str, Any] | None = None        # a flaky failure's rates and sentence (reduction.json "flaky")
    statements: int | None = None              # of ``best``
    deadline: float | None = None              # when the command stops (time.monotonic())
    timeout: float | None = None               # one candidate's timeout


def verify_grace(failure: Failure) -> float:
    """How long past the time limit a stopped reduction's best result may take to be verified cold
    (--help states it): four cold runs of the original, and at least VERIFY_GRACE seconds."""
    return max(VERIFY_GRACE, 4 * failure.wall_time)


def reduce(failure: Failure, opts: Options | None = None, listener: Listener | None = None) -> Reduction:
    """Reduce ``failure`` to the smallest script that still fails the same way, and verify it."""
    opts = opts or Options()
    listener = listener or Quiet()
    pool = gpu_pool(opts, failure, listener.note)
    oracle = make_oracle(failure, pool, command_deadline(opts))
    try:
        return _Run(failure, opts, listener, pool, oracle).run()
    finally:
        if failure.runner.zygotes is not None:
            failure.runner.zygotes.stop()


def gpu_pool(opts: Options, failure: Failure, note: Callable[[Note], None] = lambda _n: None) -> GpuPool:
    """Disjoint GPU sets of as many GPUs as the original used (failure.gpu.per_job); the first is
    the set the failure was confirmed on."""
    plan = failure.gpu
    gpus = failure.spec.gpus if failure.spec.gpus is not None else parse_gpus(opts.gpus)
    pool = GpuPool(gpus, per_gpu=opts.jobs_per_gpu, per_job=plan.per_job)
    if plan.set and pool.sets and pool.sets[0] != plan.set:
        raise ReprobotError(f"GPU set {plan.set} of the confirmation runs is not the pool's first set "
                            f"{pool.sets[0]}", ExitCode.USAGE)
    if plan.per_job > 1:
        note(Note(f"GPU sets of {plan.per_job} per job ({plan.source}): "
                  + ", ".join("{" + ",".join(s) + "}" for s in pool.sets)
                  + (f"; needs {plan.needs_gpus} GPUs: on one it {plan.one_gpu}" if plan.needs_gpus else
                     ("; it fails the same way on one GPU" if plan.one_gpu else ""))))
    if len(pool) and opts.jobs > pool.slots:
        note(Note(f"--jobs {opts.jobs} > {pool.slots} GPU slots: candidates queue for a free GPU "
                  f"(--jobs-per-gpu lets small candidates share one)", "warn"))
    return pool


def command_deadline(opts: Options) -> float | None:
    """When the whole command stops (time.monotonic()): given by the caller, else max_time from now."""
    if opts.deadline is None and opts.max_time is not None:
        return time.monotonic() + opts.max_time
    return opts.deadline


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


class _Run:
    """One reduction's state: the accepted history (the walk back reads it) and the figures."""

    def __init__(self, failure: Failure, opts: Options, listener: Listener, pool: GpuPool, oracle: Oracle) -> None:
        self.failure, self.opts, self.listener, self.pool, self.oracle = failure, opts, listener, pool, oracle
        self.jobs = opts.jobs
        self.warm = WarmReport()
        self.reducer: Reducer | None = None
        self.history: list[str] = []
        self.started = time.monotonic()
        self.cluster: dict[str, Any] | None = None     # --cluster: where the candidates ran
        self.measured: dict[str, Rate] = {}            # a flaky failure's repro rates, by source

    def say(self, text: str, level: str = "info", lead: str = "") -> None:
        self.listener.note(Note(text, level, lead))

    def warn(self, text: str) -> None:
        self.say(text, "warn")

    def ended(self, stopped: str, best: str, search: ReductionResult | None = None, **more: Any) -> Reduction:
        return Reduction(stopped, best, search=search, warm=self.warm, statements=count_statements(best),
                         deadline=self.oracle.deadline, timeout=self.oracle.timeout, **more)

    # ---- the steps -----------------------------------------------------------------------------
    def run(self) -> Reduction:
        from reducer.run.runner import reap_leftovers
        left = reap_leftovers()
        if left:
            self.warn(f"stopped {left} process(es) an earlier, killed reprobot had left running")
        try:
            start = self.checked_start()
        except DeadlineReached:
            return self.ended(NO_SEARCH, self.opts.start or self.failure.source)
        self.warm_up()
        trace = self.trace(start is not None) if self.opts.trace else None
        self.started = time.monotonic()
        max_time = None if self.oracle.deadline is None else max(0.0, self.oracle.deadline - time.monotonic())
        result = self.search(start or self.failure.source, trace, max_time)
        status = result.stats.status
        if status == "interrupted":
            self.accept(result.best_source, result.stats.to_dict(), status, result.seen)
            return self.ended(INTERRUPTED, result.best_source, result)
        stopped = status == "timeout"
        self.accept(result.best_source, result.stats.to_dict(), "stopped: time limit" if stopped else status,
                    result.seen)
        if stopped:
            # the best result so far is verified like a finished one, within a stated grace, so
            # the folder and the draft read the repro's own run
            self.oracle.deadline = time.monotonic() + verify_grace(self.failure)
        return self.verify(result, TIME_LIMIT if stopped else DONE)

    def checked_start(self) -> str | None:
        """A resumed start stands only if it still fails the same way here, cold."""
        best = self.opts.start
        if best is not None and not self.oracle.test(best, warm=False, gpu_set=self.oracle.reference_set).interesting:
            self.warn("repro.py no longer fails the same way here: starting again from the original "
                      "(the cache of earlier runs is kept)")
            best = None
        if best is not None:
            self.say(f"resuming from repro.py ({count_statements(best)} statements)")
        return best

    def warm_up(self) -> None:
        """Warm runs if the options allow them and the original does; says which it is."""
        if not self.opts.warm:
            self.warm = WarmReport(why_not="--cold")
            return
        self.warm = start_warm(self.failure, self.oracle, self.listener.remeasured,
                               lambda line: self.say(line, "detail"))
        if self.warm.enabled:
            self.say("warm start: " + self.warm.sentence())
        else:
            self.say(self.warm.why_not, "warn", "cold runs:")

    def trace(self, resumed: bool) -> TraceData | None:
        if resumed and self.opts.stored_trace is not None:
            return TraceData.from_dict(self.failure.source, self.opts.stored_trace)
        data = trace_original(self.failure, self.oracle, self.opts.recipes,
                              lambda lead, why: self.say(why, "warn", lead))
        if data is not None:
            self.listener.traced(data.to_dict())
        return data

    def search(self, source: str, trace: TraceData | None, max_time: float | None) -> ReductionResult:
        if not self.opts.cluster:
            return self.run_search(source, trace, max_time)
        from reducer.cluster.session import on_cluster
        self.cluster = {"address": self.opts.cluster}
        with on_cluster(self.opts.cluster, self.failure, self.oracle, self.pool, self.opts.cluster_slots,
                        self.warm.enabled, self.cluster, self.say, self.warn) as slots:
            if slots:
                self.jobs = slots
            return self.run_search(source, trace, max_time)

    def run_search(self, source: str, trace: TraceData | None, max_time: float | None) -> ReductionResult:
        reducer = Reducer(source, self.oracle, jobs=self.jobs, max_time=max_time, trace=trace,
                          seen=self.opts.seen, stats=self.opts.stats, on_accept=lambda best, st: self.accept(best, st),
                          failure_message=self.failure.record.message,
                          retrace=retracer(self.oracle, self.opts.recipes) if trace is not None else None)
        self.reducer = reducer
        self.accept(source, reducer.stats.to_dict(), "running")
        with self.listener.searching(max(reducer.best_size.tokens, 1)):
            reducer.on_progress = self.listener.progress
            return reducer.run()

    def verify(self, result: ReductionResult, stopped: str) -> Reduction:
        """The cold verdict (walking back where it must), the self-contained step, and a flaky
        failure's repro rate."""
        failure, oracle = self.failure, self.oracle
        try:
            best, record, outcome = cold_verdict(failure, oracle, result.best_source, self.history, self.warn,
                                                 self.measured)
            if record is None or outcome is None:
                return self.ended(NOT_COLD, result.best_source, result)
            if best != result.best_source:
                status = "stopped: time limit" if result.stats.status == "timeout" else "done"
                self.accept(best, {**result.stats.to_dict(), "cold_fallback": True}, status, result.seen)
                needs = failure.gpu.needs_gpus
                self.warn("kept the last result that fails cold" + (f" and still needs {needs} GPUs" if needs else "")
                          + f" ({count_statements(best)} statements); run again with --resume --cold to continue "
                            "from it")
            # the final word: the repro alone in an empty folder, offline
            alone = self_contained(failure, oracle, best, self.opts.private)
        except DeadlineReached:
            # the search ended, its cold check did not (a DDP script's cold run can take a minute)
            self.accept(result.best_source, {**result.stats.to_dict(), "verified": None}, "stopped: time limit",
                        result.seen)
            return self.ended(UNVERIFIED, result.best_source, result)
        cost = {"repro": {"peak_rss": outcome.peak_rss, "wall_time": round(outcome.wall_time, 2)},
                "original": {"peak_rss": max(o.peak_rss for o in failure.outcomes),
                             "wall_time": round(failure.outcomes[0].wall_time, 2)}}
        kept = self.ended(stopped, alone.source if alone.record is not None else best, result,
                          record=alone.record if alone.record is not None else record, outcome=outcome,
                          verification=alone, cold_fallback=best != result.best_source, cost=cost)
        self.listener.verified(kept)
        try:
            kept.flaky = repro_rate(failure, oracle, kept.best, self.measured)
        except DeadlineReached:
            # a stopped reduction's grace ran out measuring the repro's rate: the cold check
            # stands; the rate is the original's, said as such
            kept.flaky = unmeasured_rate(failure)
        return kept

    # ---- the figures -----------------------------------------------------------------------------
    def accept(self, best: str, stats: dict[str, Any], status: str | None = None,
               seen: dict[str, bool] | None = None) -> None:
        if not self.history or self.history[-1] != best:
            self.history.append(best)
        self.listener.accepted(best, self.figures(stats, status, seen))

    def figures(self, stats: dict[str, Any], status: str | None, seen: dict[str, bool] | None) -> dict[str, Any]:
        """reduction.json: the search's stats with the status, the seen-set, the GPU sets, the warm
        start and what the runs cost."""
        data = dict(stats)
        if status:
            data["status"] = status
        data["seen"] = seen if seen is not None else (self.reducer.seen if self.reducer else {})
        data["gpus"] = self.pool.gpus
        data["gpu_sets"] = [list(s) for s in self.pool.sets]
        plan = self.failure.gpu
        data["gpus_per_job"] = plan.per_job
        data["gpu_plan"] = plan.to_dict()
        data["needs_gpus"] = plan.needs_gpus
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
        return data


__all__ = ["DONE", "INTERRUPTED", "Listener", "NOT_COLD", "NO_SEARCH", "Note", "Options", "Quiet", "Reduction",
           "TIME_LIMIT", "UNVERIFIED", "VERIFY_GRACE", "command_deadline", "gpu_pool", "make_oracle", "reduce",
           "verify_grace"]
