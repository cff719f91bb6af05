"""The search driver: one gate for every candidate, passes repeated to a fixpoint.

API (what the CLI uses)::

    from reducer.search.driver import Reducer
    result = Reducer(source, oracle, jobs=1, max_time=None, on_accept=None, on_progress=None,
                     trace=None).run()
    result.best_source          # the reduced script (formatted, verified by a run)
    result.stats.to_dict()      # reduction.json: status, per-pass stats, runs, cache hits, sizes
    result.seen                 # {sha1(normalised source): interesting} -- the cache, for --resume

- ``oracle(source) -> bool``: True iff the candidate fails the same way (a real run). With
  ``jobs > 1`` it is called from worker threads, so it must be thread-safe (subprocess-based
  oracles are). An oracle that takes ``cancel`` (``oracle(source, cancel=event)``, as
  ``reducer.failure.oracle.Oracle`` does) gets, for a run made ahead, the event that is set once a new
  best leaves that run useless: it may stop the run (its verdict is never read).
- ``on_accept(best_source, stats_dict)`` is called after every accepted step (write repro.py
  atomically there); ``on_progress(Progress)`` after every run and at every pass change.
- ``trace``: a :class:`reducer.analysis.trace.TraceData` from one traced run of the original; enables the
  trace-guided first cut and constant propagation from recorded values.
- Resume: ``Reducer(best_so_far, oracle, seen=saved["seen"], stats=saved_reduction_json)``.
- Ctrl-C inside ``run()`` returns the best so far with ``status == "interrupted"``;
  ``max_time`` returns it with ``status == "timeout"``. An exception from the oracle itself
  propagates; ``reducer.best`` / ``reducer.stats`` still hold the best so far. A pass that
  crashes (a bug) is recorded in its stats (``errors``) and the reduction goes on.
- A script libcst cannot parse raises ``ReprobotError`` (ExitCode.NOT_PYTHON).

Three parts, each in its own module:

- the judge (reducer/search/judge.py): which candidate may run (strictly smaller than the best under
  (tokens, characters, text), not seen before, compiles, unbinds no name, spells no secret) and
  which becomes the new best;
- the scheduler (reducer/search/scheduler.py): when each candidate runs, on ``jobs`` slots. ``--jobs N``
  speculates: N candidates run at once and a slot that frees up takes the next one, while
  verdicts are read in proposal order, so the accepted sequence (and the result) is the same for
  every N. An oracle that takes ``cancel=`` (a ``threading.Event``) has runs made ahead stopped
  when a new best leaves them useless;
- the loop (reducer/search/loop.py): the passes to a fixpoint, the deadline, the layout step, progress.

Built in one order, each part handed what it uses: the judge first (it calls nothing back; the
scheduler hands it its runs with each candidate), then the loop, which builds the scheduler and
is the ``Events`` it reports to (reducer/search/scheduler.py). Every candidate goes scheduler → judge.

A pass is handed the ``Reducer``, the gate (``consider``, ``first``, ``prefetch``, ``ahead``,
``best``, ``trace``, ``failure_message``, ``failure_lines``: reducer/passes/base.py's ``Gate``).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

from reducer.analysis.size import Size
from reducer.passes import DEFAULT_PHASES, HEAVY, PRELUDE, Pass
from reducer.passes.base import Offer
from reducer.search.judge import Judge
from reducer.search.loop import OutOfTime, Progress, ReductionResult, SearchLoop
from reducer.search.scheduler import Interesting, Scheduler
from reducer.search.stats import PassStats, ReductionStats, Tally

__all__ = ["Interesting", "OutOfTime", "PassStats", "Progress", "Reducer", "ReductionResult", "ReductionStats"]


class Reducer:
    """The search, as the CLI and the passes see it: the judge, the scheduler and the loop put
    together. Passes are handed this object, their gate (``consider``, ``first``, ``prefetch``,
    ``ahead``)."""

    def __init__(self, source: str, oracle: Interesting, *, jobs: int = 1, max_time: float | None = None,
                 on_accept: Callable[[str, dict[str, Any]], None] | None = None,
                 on_progress: Callable[[Progress], None] | None = None,
                 trace: Any = None, passes: list[Pass] | None = None,
                 seen: dict[str, bool] | None = None, stats: dict[str, Any] | None = None,
                 format_result: bool = True, name_check: bool = True,
                 phases: list[list[Pass]] | None = None, failure_message: str = "",
                 prelude: list[Pass] | None = None, retrace: Callable[[str], Any] | None = None,
                 heavy: list[Pass] | None = None) -> None:
        self.oracle = oracle
        if heavy is None:       # the heavier level belongs to the default search only
            heavy = HEAVY if passes is None and phases is None else []
        if phases is None:
            phases = DEFAULT_PHASES if passes is None else [passes]
        tally = Tally(ReductionStats.from_dict(stats) if stats else ReductionStats())
        locate = getattr(oracle, "failure_lines", None)
        self.judge = Judge(source, tally=tally, seen=seen, name_check=name_check, trace=trace,
                           failure_message=failure_message, failure_lines=locate if callable(locate) else None)
        self.loop = SearchLoop(self.judge, oracle, tally, jobs=jobs, view=self,
                               phases=[list(p) for p in phases],
                               prelude=list(PRELUDE if prelude is None else prelude),   # once, before the phases
                               heavy=list(heavy), max_time=max_time,
                               format_result=format_result, retrace=retrace,
                               on_accept=on_accept, on_progress=on_progress)
        self.scheduler: Scheduler = self.loop.scheduler

    def run(self) -> ReductionResult:
        """Reduce to a fixpoint of all passes (or until max_time / Ctrl-C)."""
        return self.loop.run()

    def close(self) -> None:
        """Shut the slots (``run`` does; for a caller that used ``first`` and friends directly)."""
        self.scheduler.close(early=False)

    # ---- what a pass uses (reducer/passes/base.py's Gate) ----------------------------------
    def consider(self, source: str) -> bool:
        """Run ``source`` if it could become the new best; accept it if the oracle says so."""
        return self.scheduler.consider(source)

    def whole_programs(self) -> AbstractContextManager[None]:
        """While inside: a candidate with fewer statements than the best counts as smaller even
        when its tokens are more (reducer/search/judge.py ``statements_first``)."""
        return self.judge.whole_programs()

    def first(self, candidates: Iterable[Offer]) -> Any | None:
        """Offer tagged candidates in order; the tag of the first accepted one, else None
        (reducer/search/scheduler.py: with ``jobs > 1`` they run side by side)."""
        if self.jobs <= 1:
            # one slot: each in turn, through ``consider`` (so a subclass hears every proposal)
            for tag, source in candidates:
                if self.consider(source):
                    return tag
            return None
        return self.scheduler.first(candidates)

    def prefetch(self, sources: list[str | None]) -> None:
        """Run these side by side now, so later ``consider`` calls read their verdicts."""
        self.scheduler.prefetch(sources)

    def ahead(self, sources: list[str | None]) -> None:
        """Start these on idle slots without waiting: candidates the pass may offer next."""
        self.scheduler.ahead(sources)

    def failure_lines(self, source: str) -> tuple[int, ...] | None:
        """Where ``source`` failed in the run that accepted it, when the oracle keeps that."""
        return self.judge.failure_lines(source)

    @property
    def best(self) -> str:
        return self.judge.best

    @property
    def best_size(self) -> Size:
        return self.judge.best_size

    @property
    def trace(self) -> Any:
        return self.judge.trace

    @property
    def failure_message(self) -> str:
        return self.judge.failure_message

    # ---- what the CLI reads and sets -------------------------------------------------------
    @property
    def seen(self) -> dict[str, bool]:
        return self.judge.seen

    @property
    def stats(self) -> ReductionStats:
        return self.loop.stats

    @property
    def jobs(self) -> int:
        return self.scheduler.jobs

    @property
    def on_progress(self) -> Callable[[Progress], None] | None:
        return self.loop.on_progress

    @on_progress.setter
    def on_progress(self, fn: Callable[[Progress], None] | None) -> None:
        self.loop.on_progress = fn

    @property
    def on_accept(self) -> Callable[[str, dict[str, Any]], None] | None:
        return self.loop.on_accept

    @on_accept.setter
    def on_accept(self, fn: Callable[[str, dict[str, Any]], None] | None) -> None:
        self.loop.on_accept = fn
