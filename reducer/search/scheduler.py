"""The scheduler: which candidate runs when, on how many slots.

With one slot, a candidate runs when the judge asks for its verdict. With ``jobs > 1`` up to
``jobs`` candidates run at once (``first``, ``prefetch``), idle slots run candidates the search
may want next (``ahead``: find_integer's next probes; ``_speculate``: the next pass's first
candidates, found by a dry run of it), and a new best stops the runs made ahead that it leaves
useless (``cancel_stale``). Verdicts are read in proposal order whatever finishes first, so the
accepted sequence is the one a single slot gives.

The oracle is called as ``oracle(source)``; one that can stop a run early takes the run's
cancel event as ``oracle(source, cancel=event)`` (``reducer.failure.oracle.Oracle`` does): it is set
when the run's verdict can no longer be needed, or when the search ends.

Every candidate reaches the judge (reducer/search/judge.py) through here, with the scheduler as the
``Runs`` it asks for verdicts; what the scheduler asks of the loop that built it, and tells it,
is ``Events`` (reducer/search/loop.py's ``SearchLoop`` is one), handed to its constructor.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from typing import Any, Protocol

from reducer.errors import DeadlineReached
from reducer.passes.base import Offer, Pass
from reducer.run.slots import accepts_cancel
from reducer.search.judge import Checked, Judge
from reducer.search.stats import Tally

Interesting = Callable[[str], bool]   # a candidate source -> does it fail the same way (a real run)


class Events(Protocol):
    """What the scheduler asks of the loop that drives it, and what it tells it."""

    def check_time(self) -> None:
        """Raise (``reducer.search.loop.OutOfTime``) once the search's time is spent."""
        ...

    def progress(self) -> None:
        """A run ended."""
        ...

    def upcoming(self) -> tuple[int, Pass | None]:
        """The current pass's index, and the pass after it in its phase (None: none to run ahead)."""
        ...

    def accepted(self, source: str) -> None:
        """The judge took ``source`` as the new best."""
        ...


class External(Exception):
    """An exception from the oracle or a callback: not a pass bug, so it is not swallowed."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


class _Enough(Exception):
    """A dry run of a pass has found as many candidates as there are idle slots."""


@dataclass
class RunClock:
    """Seconds and count of oracle calls: the mean run time decides whether running ahead pays."""
    seconds: float = 0.0
    count: int = 0

    def mean(self, default: float) -> float:
        return self.seconds / self.count if self.count else default


class _DryGate:
    """The next pass, run as if every candidate it offers were refused: its first candidates,
    computed while the current pass waits on its last runs, so idle slots can run them ahead.
    Nothing is decided here; the pass itself later offers the same candidates to the real gate,
    which reads the verdicts of these runs."""

    def __init__(self, scheduler: Scheduler, want: int) -> None:
        judge = scheduler.judge
        self.best, self.trace, self.failure_message = judge.best, judge.trace, judge.failure_message
        self._scheduler, self._want = scheduler, want
        self.found: dict[str, str] = {}

    def _take(self, source: str | None) -> None:
        if source is None:
            return
        c = self._scheduler.check(source)
        if c.why is None and c.key not in self._scheduler._inflight:
            self.found.setdefault(c.key, source)
            if len(self.found) >= self._want:
                raise _Enough

    def consider(self, source: str) -> bool:
        self._take(source)
        return False

    def first(self, candidates: Iterable[Offer]) -> Any | None:
        for _tag, source in candidates:
            self._take(source)
        return None

    def prefetch(self, sources: list[str | None]) -> None:
        for source in sources:
            self._take(source)

    def ahead(self, sources: list[str | None]) -> None:
        pass        # the dry run wants the pass's own first candidates, not its guesses

    def failure_lines(self, source: str) -> tuple[int, ...] | None:
        return self._scheduler.judge.failure_lines(source)

    def whole_programs(self) -> AbstractContextManager[None]:
        return self._scheduler.judge.whole_programs()


class Scheduler:
    """Runs candidates for the judge (``Runs``), one at a time or on ``jobs`` slots."""

    # Below this mean run time, computing candidates ahead costs more than the idle slot.
    SPECULATE_MIN_RUN = 0.2

    def __init__(self, judge: Judge, oracle: Interesting, *, jobs: int, tally: Tally, events: Events) -> None:
        self.judge = judge
        self.oracle = oracle
        self.jobs = max(1, int(jobs))
        self.tally = tally
        self._events = events
        self._cancellable = accepts_cancel(oracle)
        self.run_time = RunClock()
        self._prefetched: set[str] = set()
        self._inflight: dict[str, Future] = {}     # runs started ahead whose verdict is not read yet
        # The runs in flight that a new best leaves useless (candidates computed from the old
        # best: the rest of a queue, the next pass's guesses), each with the event that stops it.
        self._stale: dict[str, threading.Event] = {}
        self._cancelled: list[Future] = []
        self._pool: ThreadPoolExecutor | None = None
        self._speculated: tuple[str, int] | None = None

    # ---- the judge: every candidate goes through here ---------------------------------------
    def check(self, source: str) -> Checked:
        """The judge's refusals that need no run, past the loop's clock (a pass computing
        candidates on a huge script stops at the deadline too)."""
        self._events.check_time()
        return self.judge.check(source)

    def consider(self, source: str) -> bool:
        """Run ``source`` if it could become the new best; accept it if the oracle says so."""
        return self._decide(self.check(source))

    def _decide(self, c: Checked) -> bool:
        """The judge's decision, with this scheduler's runs; a new best stops the runs it leaves
        useless and is told to the loop."""
        if not self.judge.decide(c, self):
            return False
        self.cancel_stale()
        self._events.accepted(c.source)
        return True

    # ---- what the judge asks (Runs) --------------------------------------------------------
    def verdict(self, source: str, key: str) -> bool:
        self._events.check_time()
        if key in self._inflight:       # already running, ahead of time: its verdict will do
            self._settle(key)
            self._prefetched.discard(key)
            return self.judge.seen[key]
        if self.jobs > 1 and self.worth_speculating():
            # run it on a slot, and fill the others with the next pass's first candidates
            self._submit(key, source)
            self._speculate()
            self._settle(key)
            self._prefetched.discard(key)
            return self.judge.seen[key]
        return self.run_here(source, key)

    def read_ahead(self, key: str) -> bool:
        if key in self._prefetched:
            self._prefetched.discard(key)
            return True
        return False

    def run_here(self, source: str, key: str) -> bool:
        """One run on the search's own thread."""
        self._events.check_time()
        self.tally.here().tried += 1
        self.tally.stats.runs += 1
        try:
            interesting = bool(self._timed(source))
        except DeadlineReached:
            raise DeadlineReached from None
        except Exception as e:
            raise External(e) from e
        self.judge.seen[key] = interesting
        self._events.progress()
        return interesting

    def _timed(self, source: str, stop: threading.Event | None = None) -> bool:
        t0 = time.monotonic()
        try:
            if stop is not None and self._cancellable:
                return self.oracle(source, cancel=stop)  # type: ignore[call-arg]
            return self.oracle(source)
        finally:
            self.run_time.seconds += time.monotonic() - t0
            self.run_time.count += 1

    # ---- what a pass asks (through reducer/search/driver.py's Reducer) -----------------------------
    def first(self, candidates: Iterable[Offer]) -> Any | None:
        """Offer tagged candidates in order; the tag of the first accepted one, else None.

        With jobs > 1 every slot is kept busy: up to ``jobs`` candidates run at once and a slot
        that frees up takes the next candidate straight away, with no barrier per batch.
        Verdicts are read strictly in proposal order, so the accepted candidate is the one a
        serial search accepts; runs made ahead that turn out not to be needed keep their verdicts
        in the seen-set."""
        if self.jobs <= 1:
            for tag, source in candidates:
                if self.consider(source):
                    return tag
            return None
        judge = self.judge
        it = iter(candidates)
        queue: deque[tuple[Any, Checked]] = deque()
        more = True
        while True:
            self._harvest()
            while more and self._running() < self.jobs:
                item = next(it, None)
                if item is None:
                    more = False
                    break
                c = self.check(item[1])
                queue.append((item[0], c))
                if c.why not in (None, "seen") or (c.why == "seen" and not judge.seen[c.key]):
                    # refused without a run: it takes no slot, and is decided when its turn
                    # comes (some refusals depend on the best, so one past the candidate that
                    # is accepted must never be recorded)
                    continue
                if c.why == "seen":
                    more = False    # known to reproduce: nothing after it can be the first
                    break
                if c.key not in self._inflight:
                    self._submit(c.key, c.source, stale_on_accept=True)
            if not queue and not more:
                return None
            head = self._inflight.get(queue[0][1].key) if queue and queue[0][1].why is None else None
            if not more and self._running() < self.jobs:
                self._speculate()
            if not queue or (more and head is not None and not head.done()):
                # every slot is busy (with runs made ahead earlier, say) or the next verdict is
                # not in yet: wait for any run to end, and fill its slot
                futures_wait([f for f in self._inflight.values() if not f.done()], return_when=FIRST_COMPLETED)
                continue
            tag, c = queue.popleft()
            if c.why is None:
                if c.key in self._inflight:     # (a repeat of an earlier candidate is settled already)
                    self._settle(c.key)
                c = dataclasses.replace(c, why="seen")
            if self._decide(c):
                return tag

    def prefetch(self, sources: list[str | None]) -> None:
        """Run these candidates in parallel now, so later ``consider`` calls read the cache."""
        if self.jobs <= 1:
            return
        self._harvest()
        todo: dict[str, str] = {}
        for s in sources:
            if s is None:
                continue
            c = self.check(s)
            # a refusal is left to consider(), in order: whether a name is unbound depends on
            # the best at that moment
            if c.why is None and c.key not in todo and c.key not in self._inflight:
                todo[c.key] = s
        if len(todo) <= 1:
            return      # nothing to gain over running it in consider()
        for k, s in todo.items():
            self._submit(k, s)
        for k in todo:
            self._settle(k)

    def ahead(self, sources: list[str | None]) -> None:
        """Start candidates the pass may offer next on idle slots, without waiting (find_integer's
        next probes). Only when runs are slow enough to be worth it; verdicts are read when the
        pass offers them, in its order, so the result is the one a serial search reaches."""
        if self.jobs <= 1 or not self.worth_speculating():
            return
        self._harvest()
        for s in sources:
            if self._running() >= self.jobs:
                return
            if s is None:
                continue
            c = self.check(s)
            if c.why is None and c.key not in self._inflight:
                self._submit(c.key, s)
                self.tally.stats.speculated += 1

    # ---- runs made ahead -------------------------------------------------------------------
    def worth_speculating(self) -> bool:
        return self.run_time.count > 0 and self.run_time.mean(0.0) >= self.SPECULATE_MIN_RUN

    def _speculate(self) -> None:
        """Idle slots run the next pass's first candidates (as if this pass accepts nothing);
        once per pass and best."""
        free = self.jobs - self._running()
        index, nxt = self._events.upcoming()
        if free <= 0 or not self.worth_speculating() or self._speculated == (self.judge.best, index):
            return
        self._speculated = (self.judge.best, index)
        if nxt is None:
            return
        dry = _DryGate(self, free)
        try:
            nxt.fn(dry)  # type: ignore[arg-type]
        except _Enough:
            pass
        except DeadlineReached:
            raise
        except Exception:  # noqa: BLE001 - the pass will meet the same bug when it runs for real
            pass
        for key, source in dry.found.items():
            if self._running() >= self.jobs:
                break
            if key not in self._inflight and key not in self.judge.seen:
                self._submit(key, source, stale_on_accept=True)
                self.tally.stats.speculated += 1

    def _submit(self, key: str, source: str, *, stale_on_accept: bool = False) -> None:
        pool = self._pool or ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="reprobot-run")
        self._pool = pool
        self._events.check_time()
        stop = None
        if stale_on_accept:
            stop = self._stale[key] = threading.Event()
        self._inflight[key] = pool.submit(self._timed, source, stop)
        self.tally.here().tried += 1
        self.tally.stats.runs += 1

    def cancel_stale(self) -> None:
        """A new best was accepted: stop the runs made ahead of candidates computed from the old
        one (every candidate is a whole program, so none of them can be offered again), so their
        slots go to candidates of the new best. Probes of a growing deletion are not among them:
        they come from the base the growth started at, and stay wanted. A stopped run's verdict
        is never recorded; offered again, it runs again."""
        for key in [k for k in self._stale if k in self._inflight]:
            fut = self._inflight[key]
            if fut.done():
                continue
            stop = self._stale.pop(key)
            if not fut.cancel():            # cancel() stops one not started yet; a running one is told
                stop.set()
            self._cancelled.append(self._inflight.pop(key))
            self.tally.stats.cancelled += 1
        self._cancelled = [f for f in self._cancelled if not f.done()]

    def _settle(self, key: str) -> None:
        """Wait for the run of ``key`` and put its verdict in the seen-set (as a run made ahead,
        so the judge counts it once)."""
        self._stale.pop(key, None)
        fut = self._inflight.pop(key)
        try:
            self.judge.seen[key] = bool(fut.result())
        except DeadlineReached:
            raise DeadlineReached from None
        except Exception as e:
            raise External(e) from e
        self._prefetched.add(key)
        self._events.progress()

    def _running(self) -> int:
        return sum(1 for f in self._inflight.values() if not f.done())

    def _harvest(self) -> None:
        """Verdicts of finished runs made ahead (including ones no longer needed because an
        earlier candidate was accepted): into the seen-set, here on the search's own thread. A
        run that raised stays in flight: whoever needs its verdict gets the exception."""
        for key, fut in list(self._inflight.items()):
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                del self._inflight[key]
                self._stale.pop(key, None)
                self.judge.seen[key] = bool(fut.result())
                self._prefetched.add(key)

    # ---- the end ---------------------------------------------------------------------------
    def close(self, early: bool) -> None:
        """Shut the slots. Runs made ahead and still going when the search ends are not needed:
        stopped, like every run at a timeout or Ctrl-C (``early``), so that no candidate outlives
        the search."""
        if self._pool is None:
            return
        early = early or any(not f.done() for f in [*self._inflight.values(), *self._cancelled])
        if early:
            from reducer.run.runner import stop_runs_in_flight
            stop_runs_in_flight()
        # Waiting is short once the runs in flight are told to stop.
        self._pool.shutdown(wait=early, cancel_futures=True)
        self._pool = None
        if early:
            from reducer.run.runner import allow_runs
            allow_runs()

    def finish(self) -> int:
        """Read the verdicts of runs that ended; how many runs made ahead were never needed."""
        self._harvest()
        unused = len(self._prefetched) + len(self._inflight)
        self._prefetched.clear()
        self._inflight.clear()
        return unused
