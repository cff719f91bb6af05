"""The loop: passes repeated to a fixpoint, the deadline, the layout step, progress and stats.

The prelude runs once; then each phase to a fixpoint before the next, a change in a finer phase
sending the search back to the coarsest, so the end is a fixpoint of every pass; after an early
fixpoint, a heavier level, whose gains go through the phases again. A pass is handed the object
that stands for the search to it (reducer/passes/base.py's ``Gate``: reducer/search/driver.py's
``Reducer``), and proposes through it; the loop itself decides nothing about a candidate.
"""
from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from reducer.analysis.cst import parses
from reducer.analysis.size import Size, count_statements, size_of
from reducer.errors import DeadlineReached
from reducer.passes.base import Gate, Pass
from reducer.search.judge import Judge, candidate_key
from reducer.search.scheduler import External, Interesting, Scheduler
from reducer.search.stats import ReductionStats, Tally


class OutOfTime(DeadlineReached):
    """``max_time`` is spent; the best so far stands."""


@dataclass(frozen=True)
class Progress:
    pass_name: str
    round: int
    runs: int
    accepted: int
    cache_hits: int
    size_start: Size
    size_now: Size
    elapsed: float


@dataclass
class ReductionResult:
    best_source: str
    stats: ReductionStats
    seen: dict[str, bool]


class SearchLoop:
    # The layout step after a time limit gets what is left of this reserve: a person reads the
    # result of an interrupted reduction too.
    FORMAT_RESERVE_SHARE = 0.1
    # The heavier level runs when the fixpoint came before this share of --max-time, or, without
    # one, before DEFAULT_BUDGET seconds of search.
    HEAVY_SHARE = 0.5
    DEFAULT_BUDGET = 600.0
    # The alarm rings this long after the deadline: the scheduler's own clock checks come first.
    ALARM_GRACE = 1.0
    # A traced run is a cold run the search waits for: at most this share of the wall time.
    RETRACE_SHARE = 0.25

    def __init__(self, judge: Judge, oracle: Interesting, tally: Tally, *, jobs: int, view: Gate,
                 phases: list[list[Pass]], prelude: list[Pass], heavy: list[Pass],
                 max_time: float | None = None,
                 format_result: bool = True, retrace: Callable[[str], Any] | None = None,
                 on_accept: Callable[[str, dict[str, Any]], None] | None = None,
                 on_progress: Callable[[Progress], None] | None = None) -> None:
        self.judge, self.tally = judge, tally
        # The loop drives the scheduler and is its ``Events``: the clock, progress, the pass after
        # this one, a new best (reducer/search/scheduler.py). Built here, so neither waits for the other.
        self.scheduler = Scheduler(judge, oracle, jobs=jobs, tally=tally, events=self)
        self._oracle = oracle
        self.stats = tally.stats
        self.view = view            # what each pass is handed
        self.phases, self.prelude, self.heavy = phases, prelude, heavy
        self.max_time = max_time
        self.format_result = format_result
        # ``retrace(source)`` traces a smaller best, so passes read the values that reach the
        # failure now (one handler left of three, one loop pass left of five)
        self.retrace = retrace
        self.on_accept = on_accept
        self.on_progress = on_progress
        if not self.stats.size_before:
            self.stats.size_before = judge.best_size.to_dict()
            self.stats.statements_before = _statements(judge.best)
        self._start_size = judge.best_size
        self._t0 = time.monotonic()
        self._deadline: float | None = None
        self._wall_before = self.stats.wall_time
        self._cpu_before = self.stats.reducer_cpu
        self._cpu0 = time.process_time()
        self._searching = False                 # the time check keeps the layout step's reserve

    # ---- what the scheduler asks and tells (its Events) -------------------------------------
    def _oracle_deadline(self) -> float | None:
        """The oracle's own end (``reducer.failure.oracle.Oracle.deadline``), read when asked: it may be set
        after the search is built."""
        return getattr(self._oracle, "deadline", None)

    def check_time(self) -> None:
        ends = [d for d in (self._deadline, self._oracle_deadline()) if d is not None]
        if ends and time.monotonic() >= min(ends) - (self._format_reserve() if self._searching else 0.0):
            raise OutOfTime

    def progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(self.tally.pass_name, self.stats.rounds, self.stats.runs, self.stats.accepted,
                                      self.stats.cache_hits, self._start_size, self.judge.best_size,
                                      time.monotonic() - self._t0))

    def accepted(self, source: str) -> None:
        """The judge took a new best: the figures, the caller's callback, progress."""
        self._refresh_stats()
        if self.on_accept is not None:
            try:
                self.on_accept(source, self.stats.to_dict())
            except Exception as e:
                raise External(e) from e
        self.progress()

    def upcoming(self) -> tuple[int, Pass | None]:
        """The current pass's index, and the pass after it in its phase (None when it is the
        phase's last, or no phase pass is running): what idle slots may run ahead."""
        level, index = self.stats.level, self.stats.pass_index
        phase = self.phases[min(level, len(self.phases) - 1)]
        if index + 1 >= len(phase) or self.tally.pass_name != phase[index].name:
            return index, None
        return index, phase[index + 1]

    # ---- the loop --------------------------------------------------------------------------
    def run(self) -> ReductionResult:
        """Reduce to a fixpoint of all passes (or until max_time / Ctrl-C)."""
        self._t0 = time.monotonic()
        self._cpu0 = time.process_time()
        self._deadline = None if self.max_time is None else self._t0 + self.max_time
        self.stats.status = "running"
        self._searching = True
        try:
            with _alarm(self._hard_end()):
                self._search()
            self._searching = False
            if self.format_result:
                self._format()
            self.stats.status = "done"
        except DeadlineReached:
            self.stats.status = "timeout"
            self._format_after_time_limit()
        except KeyboardInterrupt:
            self.stats.status = "interrupted"
        except External as e:
            self.stats.status = "error"
            raise e.original from None
        finally:
            self._searching = False
            self._close()
            self.stats.speculative_unused += self.scheduler.finish()
            self._refresh_stats()
            self.stats.statements_after = _statements(self.judge.best)
        return ReductionResult(self.judge.best, self.stats, self.judge.seen)

    def _search(self) -> None:
        if not self.stats.first_cut_done:     # the prelude, once (kept across --resume)
            for p in self.prelude:
                # a prelude pass that changed the best (bring_home: the child's work now runs in
                # the parent) hands the next ones a trace of what runs now, not of the original
                self._refresh_trace()
                self._run_pass(p)
            self.stats.first_cut_done = True
        # each phase to a fixpoint before the next; a change in a finer phase sends the
        # search back to the coarsest, so the end is a fixpoint of every pass
        level = min(self.stats.level, len(self.phases) - 1)
        start = self.stats.pass_index if 0 <= self.stats.pass_index < len(self.phases[level]) else 0
        while True:
            while level < len(self.phases):
                if level == 0 and start == 0:
                    self._refresh_trace()
                before = self._round(level, start)
                # a resumed round started midway: finish it as a whole round before judging it
                changed = self.judge.best != before or start > 0
                start = 0
                level = 0 if changed else level + 1
            # A fixpoint of every pass. If it came early, a heavier level before stopping; what
            # it gains is reduced again by the usual phases, and a level that gains nothing ends.
            if not self._heavy_allowed():
                return
            self._refresh_trace()
            before = self.judge.best
            self.stats.heavy_rounds += 1
            for p in self.heavy:
                self._run_pass(p)
            if self.judge.best == before:
                self.stats.heavy_skipped = "gained nothing"
                return
            self.stats.heavy_gains += 1
            level = 0

    def _round(self, level: int, start: int = 0) -> str:
        """Run the passes of phase ``level`` once each (from ``start``); returns the best
        source from before the round."""
        self.stats.rounds += 1
        before = self.judge.best
        self.stats.level = level
        for i, p in enumerate(self.phases[level][start:], start):
            self.stats.pass_index = i
            self._run_pass(p)
        return before

    def _run_pass(self, p: Pass) -> None:
        self.tally.pass_name = p.name
        self.progress()
        t0 = time.monotonic()
        try:
            p.fn(self.view)
        except (DeadlineReached, KeyboardInterrupt, External):
            raise
        except Exception as e:  # noqa: BLE001 - a bug in one pass must not lose hours of runs
            errors = self.stats.for_pass(p.name).errors
            if len(errors) < 5:
                errors.append(f"{type(e).__name__}: {e}"[:300])
        finally:
            self.stats.for_pass(p.name).seconds += time.monotonic() - t0

    def _heavy_allowed(self) -> bool:
        if not self.heavy:
            return False
        elapsed = time.monotonic() - self._t0
        budget = self.DEFAULT_BUDGET if self.max_time is None else self.HEAVY_SHARE * self.max_time
        if elapsed >= budget:
            self.stats.heavy_skipped = f"fixpoint at {elapsed:.0f}s, not before {budget:.0f}s"
            return False
        return True

    def _refresh_trace(self) -> None:
        judge = self.judge
        if self.retrace is None or judge.trace is None or judge.best == judge.trace.source:
            return
        spent = self.stats.for_pass("retrace").seconds
        if spent > self.RETRACE_SHARE * max(self.stats.wall_time, time.monotonic() - self._t0):
            return
        self.check_time()
        self.tally.pass_name = "retrace"
        self.progress()
        t0 = time.monotonic()
        try:
            fresh = self.retrace(judge.best)
        except DeadlineReached:
            raise OutOfTime from None
        except Exception as e:  # noqa: BLE001 - a failed trace only means no fresh values
            errors = self.stats.for_pass("retrace").errors
            if len(errors) < 5:
                errors.append(f"{type(e).__name__}: {e}"[:300])
            fresh = None
        finally:
            self.stats.for_pass("retrace").seconds += time.monotonic() - t0
        if fresh is not None:
            judge.trace = fresh
            self.stats.retraces += 1

    # ---- the deadline ----------------------------------------------------------------------
    def _format_reserve(self) -> float:
        """Time kept back from the search for the layout step: two runs' worth, at most a tenth
        of --max-time."""
        if not self.format_result or self.max_time is None:
            return 0.0
        return min(self.FORMAT_RESERVE_SHARE * self.max_time, max(1.0, 2 * self.scheduler.run_time.mean(0.5)))

    def _hard_end(self) -> float | None:
        ends = [d for d in (self._deadline, self._oracle_deadline()) if d is not None]
        return min(ends) + self.ALARM_GRACE if ends else None

    # ---- the end ---------------------------------------------------------------------------
    def _close(self) -> None:
        self.scheduler.close(early=self.stats.status in ("timeout", "interrupted"))

    def _format_after_time_limit(self) -> None:
        """The search stopped at its deadline, which keeps a reserve: lay the best out in it
        (the runs still going are stopped first, so the reserve is the layout's)."""
        self._searching = False
        if not self.format_result:
            return
        self._close()
        try:
            self._format()
        except (DeadlineReached, External):
            pass        # no time left after all, or the run failed: the best stands as it is

    def _format(self) -> None:
        """Lay the result out as a person would; the layout is kept only if it still fails the
        same way (hoisting an import can matter), so it costs at most two runs."""
        from reducer.analysis.format import format_source, tidy
        judge = self.judge
        self.tally.pass_name = "format"
        t0 = time.monotonic()
        try:
            for candidate in (format_source(judge.best), tidy(judge.best)):
                if candidate is None or candidate == judge.best or not parses(candidate, judge.compile_check):
                    continue
                key = candidate_key(candidate)
                ok = judge.seen[key] if key in judge.seen else self.scheduler.run_here(candidate, key)
                if ok:
                    judge.best, judge.best_size = candidate, size_of(candidate)
                    self.stats.for_pass("format").accepted += 1
                    self._refresh_stats()
                    if self.on_accept is not None:
                        self.on_accept(candidate, self.stats.to_dict())
                    break
        finally:
            self.stats.for_pass("format").seconds += time.monotonic() - t0

    def _refresh_stats(self) -> None:
        self.stats.size_after = self.judge.best_size.to_dict()
        self.stats.wall_time = self._wall_before + time.monotonic() - self._t0
        self.stats.reducer_cpu = self._cpu_before + time.process_time() - self._cpu0


@contextmanager
def _alarm(at: float | None) -> Iterator[None]:
    """Raise OutOfTime in the main thread at ``at`` (time.monotonic()), wherever it is: a pass
    computing its candidates in pure Python for minutes asks the gate nothing, so no clock check
    would stop it. Only in the main thread (where signals are delivered), where SIGALRM exists."""
    if at is None or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def ring(signum: int, frame: Any) -> None:
        raise OutOfTime

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(0.01, at - time.monotonic()))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _statements(source: str) -> int:
    try:
        return count_statements(source)
    except Exception:       # an unparseable original is the CLI's to report, not a crash here
        return 0
