"""The search driver: one gate for every candidate, passes repeated to a fixpoint.

API (what the CLI uses)::

    from reducer.search import Reducer
    result = Reducer(source, oracle, jobs=1, max_time=None, on_accept=None, on_progress=None,
                     trace=None).run()
    result.best_source          # the reduced script (formatted, verified by a run)
    result.stats.to_dict()      # reduction.json: status, per-pass stats, runs, cache hits, sizes
    result.seen                 # {sha1(normalised source): interesting} -- the cache, for --resume

- ``oracle(source) -> bool``: True iff the candidate fails the same way (a real run). With
  ``jobs > 1`` it is called from worker threads, so it must be thread-safe (subprocess-based
  oracles are).
- ``on_accept(best_source, stats_dict)`` is called after every accepted step (write repro.py
  atomically there); ``on_progress(Progress)`` after every run and at every pass change.
- ``trace``: a :class:`reducer.trace.TraceData` from one traced run of the original; enables the
  trace-guided first cut and constant propagation from recorded values.
- Resume: ``Reducer(best_so_far, oracle, seen=saved["seen"], stats=saved_reduction_json)``.
- Ctrl-C inside ``run()`` returns the best so far with ``status == "interrupted"``;
  ``max_time`` returns it with ``status == "timeout"``. An exception from the oracle itself
  propagates; ``reducer.best`` / ``reducer.stats`` still hold the best so far. A pass that
  crashes (a bug) is recorded in its stats (``errors``) and the reduction goes on.
- A script libcst cannot parse raises ``ReprobotError`` (ExitCode.NOT_PYTHON).

The gate (``consider``): a candidate is run only if it is strictly smaller than the best under
(tokens, characters, text), has not been seen (the seen-set, keyed on normalised source, is the
cache), and parses (libcst and ``compile``). ``--jobs N`` speculates: N candidates run at once
and a slot that frees up takes the next one, while verdicts are read in proposal order, so the
accepted sequence (and the result) is the same for every N.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import asdict, dataclass, field
from typing import Any

import libcst as cst

from reducer.errors import DeadlineReached, ExitCode, ReprobotError
from reducer.passes import DEFAULT_PHASES, HEAVY, PRELUDE, Pass
from reducer.passes.base import Offer, compiles, libcst_parses, parses
from reducer.passes.names import unbound_reads
from reducer.provenance import leaked, secret_values
from reducer.runner import cancellable
from reducer.size import Size, count_statements, normalize, size_of

Interesting = Callable[[str], bool]   # a candidate source -> does it fail the same way (a real run)


class OutOfTime(DeadlineReached):
    """``max_time`` is spent; the best so far stands."""


class _Enough(Exception):
    """A dry run of a pass has found as many candidates as there are idle slots."""


class _DryGate:
    """The next pass, run as if every candidate it offers were refused: its first candidates,
    computed while the current pass waits on its last runs, so idle slots can run them ahead.
    Nothing is decided here; the pass itself later offers the same candidates to the real gate,
    which reads the verdicts of these runs."""

    def __init__(self, reducer: Reducer, want: int) -> None:
        self.best, self.trace, self.failure_message = reducer.best, reducer.trace, reducer.failure_message
        self._reducer, self._want = reducer, want
        self.found: dict[str, str] = {}

    def _take(self, source: str | None) -> None:
        if source is None:
            return
        c = self._reducer._check(source)
        if c.why is None and c.key not in self._reducer._inflight:
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
        return self._reducer.failure_lines(source)


class _External(Exception):
    """An exception from the oracle or a callback: not a pass bug, so it is not swallowed."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


@dataclass
class PassStats:
    proposed: int = 0       # candidates offered to the gate
    tried: int = 0          # candidates actually run (oracle calls)
    accepted: int = 0
    cache_hits: int = 0     # answered from the seen-set without a run
    not_smaller: int = 0    # refused by the size order
    invalid: int = 0        # did not parse / compile
    unbound: int = 0        # would read a name nothing binds any more (a sure NameError)
    secret: int = 0         # would spell a secret of the environment the best does not
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)   # a pass that crashed (a bug), kept going

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 3)
        return d


@dataclass
class ReductionStats:
    status: str = "running"         # running | done | interrupted | timeout
    passes: dict[str, PassStats] = field(default_factory=dict)
    runs: int = 0                   # oracle calls, speculative ones included
    speculative_unused: int = 0     # runs made ahead whose verdict was never needed
    cache_hits: int = 0
    accepted: int = 0
    rounds: int = 0
    first_cut_done: bool = False
    # Where the search is (phase, pass within it), so --resume continues there.
    level: int = 0
    pass_index: int = 0
    size_before: dict[str, int] = field(default_factory=dict)
    size_after: dict[str, int] = field(default_factory=dict)
    statements_before: int = 0
    statements_after: int = 0
    wall_time: float = 0.0
    # CPU time of reprobot's own process (passes, the gate, reading outputs), candidates excluded:
    # what has to stay small per candidate on a long script.
    reducer_cpu: float = 0.0
    proposed: int = 0               # candidates offered by the passes, run or not
    retraces: int = 0               # traced runs of a changed best (fresh recorded values)
    speculated: int = 0             # runs made on idle slots ahead of need (the next pass, the next probes)
    cancelled: int = 0              # runs made ahead, stopped once a new best made them useless
    # The heavier level (reducer/passes/heavy.py): rounds run after an early fixpoint, the ones
    # that gained something, and why it was not run (or stopped) when it was not.
    heavy_rounds: int = 0
    heavy_gains: int = 0
    heavy_skipped: str = ""

    def for_pass(self, name: str) -> PassStats:
        return self.passes.setdefault(name, PassStats())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["passes"] = {k: v.to_dict() for k, v in self.passes.items()}
        d["wall_time"] = round(self.wall_time, 3)
        d["reducer_cpu"] = round(self.reducer_cpu, 3)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReductionStats:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k != "passes"}
        stats = cls(**known)
        for name, p in (d.get("passes") or {}).items():
            stats.passes[name] = PassStats(**{k: v for k, v in p.items() if k in PassStats.__dataclass_fields__})
        return stats


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


@dataclass(frozen=True)
class _Checked:
    source: str
    size: Size
    key: str                # "" when refused before the key was needed
    why: str | None         # not_smaller | seen | invalid | unbound | secret; None: only a run can tell


@functools.lru_cache(maxsize=256)
def _unbound(source: str) -> frozenset[str] | None:
    """``unbound_reads`` of a source; the best's is asked for with every candidate. (Not through
    the passes' parse cache: candidates would push the best out of it.)"""
    return unbound_reads(source)


def _key(source: str) -> str:
    return hashlib.sha1(normalize(source).encode("utf-8", "surrogatepass")).hexdigest()


class Reducer:
    def __init__(self, source: str, oracle: Interesting, *, jobs: int = 1, max_time: float | None = None,
                 on_accept: Callable[[str, dict[str, Any]], None] | None = None,
                 on_progress: Callable[[Progress], None] | None = None,
                 trace: Any = None, passes: list[Pass] | None = None,
                 seen: dict[str, bool] | None = None, stats: dict[str, Any] | None = None,
                 format_result: bool = True, name_check: bool = True,
                 phases: list[list[Pass]] | None = None, failure_message: str = "",
                 prelude: list[Pass] | None = None, retrace: Callable[[str], Any] | None = None,
                 heavy: list[Pass] | None = None) -> None:
        try:
            cst.parse_module(source)
        except cst.ParserSyntaxError as e:
            raise ReprobotError(f"cannot parse the script for reduction: line {e.raw_line}: {e.message}",
                                ExitCode.NOT_PYTHON) from None
        # A script written for a newer Python than reprobot's own still parses with libcst;
        # then compile() cannot judge candidates and only libcst's parse does.
        self.compile_check = parses(source, compile_check=True)
        self.best = source
        self.best_size = size_of(source)
        # The target's message as the original printed it: values it shows stay (literals pass).
        self.failure_message = failure_message
        self.oracle = oracle
        self.jobs = max(1, int(jobs))
        self.max_time = max_time
        self.on_accept = on_accept
        self.on_progress = on_progress
        self.trace = trace
        # ``retrace(source)`` traces a smaller best, so passes read the values that reach the
        # failure now (one handler left of three, one loop pass left of five)
        self.retrace = retrace
        if heavy is None:       # the heavier level belongs to the default search only
            heavy = HEAVY if passes is None and phases is None else []
        self.heavy = list(heavy)
        if phases is None:
            phases = DEFAULT_PHASES if passes is None else [passes]
        self.phases = [list(p) for p in phases]
        self.prelude = list(PRELUDE if prelude is None else prelude)   # once, before the phases
        self.seen: dict[str, bool] = dict(seen or {})
        self.stats = ReductionStats.from_dict(stats) if stats else ReductionStats()
        self.format_result = format_result
        self.name_check = name_check
        if not self.stats.size_before:
            self.stats.size_before = self.best_size.to_dict()
            self.stats.statements_before = _statements(source)
        self._start_size = self.best_size
        self._prefetched: set[str] = set()
        self._inflight: dict[str, Future] = {}     # runs started ahead whose verdict is not read yet
        # The runs in flight that a new best leaves useless (candidates computed from the old
        # best: the rest of a queue, the next pass's guesses), each with the event that stops it.
        self._stale: dict[str, threading.Event] = {}
        self._cancelled: list[Future] = []
        self._pass = "setup"
        self._pool: ThreadPoolExecutor | None = None
        self._t0 = time.monotonic()
        self._deadline: float | None = None
        self._wall_before = self.stats.wall_time
        self._cpu_before = self.stats.reducer_cpu
        self._cpu0 = time.process_time()
        self._run_time = [0.0, 0]               # seconds and count of oracle calls (mean run time)
        self._searching = False                 # the time check keeps the layout step's reserve
        self._speculated: tuple[str, int] | None = None
        self._secrets = secret_values()

    # ---- the gate -------------------------------------------------------------------------
    def consider(self, source: str) -> bool:
        """Run ``source`` if it could become the new best; accept it if the oracle says so."""
        return self._decide(self._check(source))

    def _check(self, source: str) -> _Checked:
        """What the gate knows before any run: the refusals that need none (not smaller than the
        best, does not parse, would unbind a name), or that the seen-set answers."""
        # A pass computing candidates on a huge script stops at the deadline too.
        self._check_time()
        size = size_of(source)
        if not size < self.best_size:
            return _Checked(source, size, "", "not_smaller")
        key = _key(source)
        if key in self.seen:
            return _Checked(source, size, key, "seen")
        # cheapest first: compile and the name check are C-fast, libcst's parse is not
        if self.compile_check and not compiles(source):
            return _Checked(source, size, key, "invalid")
        if self._unbinds(source):
            return _Checked(source, size, key, "unbound")
        if self._spells_secret(source):
            return _Checked(source, size, key, "secret")
        # What compiles is run; libcst's parse (which the passes need) is checked when a candidate
        # is accepted (_decide): most candidates are not, and the parse was the gate's largest
        # cost per candidate. A script for a newer Python than reprobot's has only this check.
        if not self.compile_check and not libcst_parses(source):
            return _Checked(source, size, key, "invalid")
        return _Checked(source, size, key, None)

    def _spells_secret(self, source: str) -> bool:
        """A secret of this environment that the best does not contain: no pass (a recorded value,
        a folded constant) may write one into a repro that is filed in public."""
        found = leaked(source, self._secrets)
        return found is not None and leaked(self.best, [found]) is None

    def _decide(self, c: _Checked) -> bool:
        ps = self.stats.for_pass(self._pass)
        ps.proposed += 1
        self.stats.proposed += 1
        if c.why == "seen":
            if c.key in self._prefetched:
                self._prefetched.discard(c.key)     # a speculative run: already counted in tried
            else:
                ps.cache_hits += 1
                self.stats.cache_hits += 1
            interesting = self.seen[c.key]
        elif c.why is not None:
            setattr(ps, c.why, getattr(ps, c.why) + 1)
            if c.key:
                self.seen[c.key] = False
            return False
        else:
            interesting = self._run(c.source, c.key)
        if interesting and self.compile_check and not libcst_parses(c.source):
            ps.invalid += 1                     # it reproduces, but the passes could not read it
            self.seen[c.key] = False
            return False
        if interesting:
            self._accept(c.source, c.size)
        return interesting

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
        it = iter(candidates)
        queue: deque[tuple[Any, _Checked]] = deque()
        more = True
        while True:
            self._harvest()
            while more and self._running() < self.jobs:
                item = next(it, None)
                if item is None:
                    more = False
                    break
                c = self._check(item[1])
                queue.append((item[0], c))
                if c.why not in (None, "seen") or (c.why == "seen" and not self.seen[c.key]):
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

    def _submit(self, key: str, source: str, *, stale_on_accept: bool = False) -> None:
        pool = self._pool or ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="reprobot-run")
        self._pool = pool
        self._check_time()
        stop = None
        if stale_on_accept:
            stop = self._stale[key] = threading.Event()
        self._inflight[key] = pool.submit(self._timed, source, stop)
        self.stats.for_pass(self._pass).tried += 1
        self.stats.runs += 1

    def _cancel_stale(self) -> None:
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
            self.stats.cancelled += 1
        self._cancelled = [f for f in self._cancelled if not f.done()]

    def _settle(self, key: str) -> None:
        """Wait for the run of ``key`` and put its verdict in the seen-set (as a run made ahead,
        so ``_decide`` counts it once)."""
        self._stale.pop(key, None)
        fut = self._inflight.pop(key)
        try:
            self.seen[key] = bool(fut.result())
        except DeadlineReached:
            raise OutOfTime from None
        except Exception as e:
            raise _External(e) from e
        self._prefetched.add(key)
        self._progress()

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
                self.seen[key] = bool(fut.result())
                self._prefetched.add(key)

    def prefetch(self, sources: list[str]) -> None:
        """Run these candidates in parallel now, so later ``consider`` calls read the cache."""
        if self.jobs <= 1:
            return
        self._harvest()
        todo: dict[str, str] = {}
        for s in sources:
            if s is None:
                continue
            c = self._check(s)
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
        if self.jobs <= 1 or not self._worth_speculating():
            return
        self._harvest()
        for s in sources:
            if self._running() >= self.jobs:
                return
            if s is None:
                continue
            c = self._check(s)
            if c.why is None and c.key not in self._inflight:
                self._submit(c.key, s)
                self.stats.speculated += 1

    def failure_lines(self, source: str) -> tuple[int, ...] | None:
        """Where ``source`` failed in the run that accepted it (the script's own traceback
        lines), when the oracle keeps that (``reducer.oracle.Oracle`` does)."""
        locate = getattr(self.oracle, "failure_lines", None)
        return locate(source) if callable(locate) else None

    def _unbinds(self, source: str) -> bool:
        """The candidate reads a name that the best binds and it no longer does."""
        if not self.name_check:
            return False
        before = _unbound(self.best)
        after = _unbound(source)
        return before is not None and after is not None and bool(after - before)

    def _run(self, source: str, key: str) -> bool:
        self._check_time()
        if key in self._inflight:       # already running, ahead of time: its verdict will do
            self._settle(key)
            self._prefetched.discard(key)
            return self.seen[key]
        if self.jobs > 1 and self._worth_speculating():
            # run it on a slot, and fill the others with the next pass's first candidates
            self._submit(key, source)
            self._speculate()
            self._settle(key)
            self._prefetched.discard(key)
            return self.seen[key]
        return self._run_here(source, key)

    def _run_here(self, source: str, key: str) -> bool:
        """One run on the search's own thread."""
        self._check_time()
        ps = self.stats.for_pass(self._pass)
        ps.tried += 1
        self.stats.runs += 1
        try:
            interesting = bool(self._timed(source))
        except DeadlineReached:
            raise OutOfTime from None
        except Exception as e:
            raise _External(e) from e
        self.seen[key] = interesting
        self._progress()
        return interesting

    def _timed(self, source: str, stop: threading.Event | None = None) -> bool:
        t0 = time.monotonic()
        try:
            with cancellable(stop):
                return self.oracle(source)
        finally:
            self._run_time[0] += time.monotonic() - t0
            self._run_time[1] += 1

    # Below this mean run time, computing candidates ahead costs more than the idle slot.
    SPECULATE_MIN_RUN = 0.2

    def _worth_speculating(self) -> bool:
        seconds, count = self._run_time
        return count > 0 and seconds / count >= self.SPECULATE_MIN_RUN

    def _speculate(self) -> None:
        """Idle slots run the next pass's first candidates (as if this pass accepts nothing);
        once per pass and best."""
        free = self.jobs - self._running()
        level, index = self.stats.level, self.stats.pass_index
        if free <= 0 or not self._worth_speculating() or self._speculated == (self.best, index):
            return
        self._speculated = (self.best, index)
        phase = self.phases[min(level, len(self.phases) - 1)]
        if index + 1 >= len(phase) or self._pass != phase[index].name:
            return
        nxt = phase[index + 1]
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
            if key not in self._inflight and key not in self.seen:
                self._submit(key, source, stale_on_accept=True)
                self.stats.speculated += 1

    def _accept(self, source: str, size: Size) -> None:
        self.best, self.best_size = source, size
        self._cancel_stale()
        self.stats.for_pass(self._pass).accepted += 1
        self.stats.accepted += 1
        self._refresh_stats()
        if self.on_accept is not None:
            try:
                self.on_accept(source, self.stats.to_dict())
            except Exception as e:
                raise _External(e) from e
        self._progress()

    def _check_time(self) -> None:
        ends = [d for d in (self._deadline, getattr(self.oracle, "deadline", None)) if d is not None]
        if ends and time.monotonic() >= min(ends) - (self._format_reserve() if self._searching else 0.0):
            raise OutOfTime

    # The layout step after a time limit gets what is left of this reserve: a person reads the
    # result of an interrupted reduction too.
    FORMAT_RESERVE_SHARE = 0.1

    def _format_reserve(self) -> float:
        """Time kept back from the search for the layout step: two runs' worth, at most a tenth
        of --max-time."""
        if not self.format_result or self.max_time is None:
            return 0.0
        seconds, count = self._run_time
        mean = seconds / count if count else 0.5
        return min(self.FORMAT_RESERVE_SHARE * self.max_time, max(1.0, 2 * mean))

    def _progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(self._pass, self.stats.rounds, self.stats.runs, self.stats.accepted,
                                      self.stats.cache_hits, self._start_size, self.best_size,
                                      time.monotonic() - self._t0))

    def _refresh_stats(self) -> None:
        self.stats.size_after = self.best_size.to_dict()
        self.stats.wall_time = self._wall_before + time.monotonic() - self._t0
        self.stats.reducer_cpu = self._cpu_before + time.process_time() - self._cpu0

    # ---- the loop -------------------------------------------------------------------------
    def _run_pass(self, p: Pass) -> None:
        self._pass = p.name
        self._progress()
        t0 = time.monotonic()
        try:
            p.fn(self)
        except (DeadlineReached, KeyboardInterrupt, _External):
            raise
        except Exception as e:  # noqa: BLE001 - a bug in one pass must not lose hours of runs
            errors = self.stats.for_pass(p.name).errors
            if len(errors) < 5:
                errors.append(f"{type(e).__name__}: {e}"[:300])
        finally:
            self.stats.for_pass(p.name).seconds += time.monotonic() - t0

    def _round(self, level: int, start: int = 0) -> str:
        """Run the passes of phase ``level`` once each (from ``start``); returns the best
        source from before the round."""
        self.stats.rounds += 1
        before = self.best
        self.stats.level = level
        for i, p in enumerate(self.phases[level][start:], start):
            self.stats.pass_index = i
            self._run_pass(p)
        return before

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
        except _External as e:
            self.stats.status = "error"
            raise e.original from None
        finally:
            self._searching = False
            self._close_pool()
            self._harvest()
            self.stats.speculative_unused += len(self._prefetched) + len(self._inflight)
            self._prefetched.clear()
            self._inflight.clear()
            self._refresh_stats()
            self.stats.statements_after = _statements(self.best)
        return ReductionResult(self.best, self.stats, self.seen)

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
                changed = self.best != before or start > 0
                start = 0
                level = 0 if changed else level + 1
            # A fixpoint of every pass. If it came early, a heavier level before stopping; what
            # it gains is reduced again by the usual phases, and a level that gains nothing ends.
            if not self._heavy_allowed():
                return
            self._refresh_trace()
            before = self.best
            self.stats.heavy_rounds += 1
            for p in self.heavy:
                self._run_pass(p)
            if self.best == before:
                self.stats.heavy_skipped = "gained nothing"
                return
            self.stats.heavy_gains += 1
            level = 0

    # The heavier level runs when the fixpoint came before this share of --max-time, or, without
    # one, before DEFAULT_BUDGET seconds of search.
    HEAVY_SHARE = 0.5
    DEFAULT_BUDGET = 600.0

    def _heavy_allowed(self) -> bool:
        if not self.heavy:
            return False
        elapsed = time.monotonic() - self._t0
        budget = self.DEFAULT_BUDGET if self.max_time is None else self.HEAVY_SHARE * self.max_time
        if elapsed >= budget:
            self.stats.heavy_skipped = f"fixpoint at {elapsed:.0f}s, not before {budget:.0f}s"
            return False
        return True

    # The alarm rings this long after the deadline: the gate's own clock checks come first.
    ALARM_GRACE = 1.0

    def _hard_end(self) -> float | None:
        ends = [d for d in (self._deadline, getattr(self.oracle, "deadline", None)) if d is not None]
        return min(ends) + self.ALARM_GRACE if ends else None

    # A traced run is a cold run the search waits for: at most this share of the wall time.
    RETRACE_SHARE = 0.25

    def _refresh_trace(self) -> None:
        if self.retrace is None or self.trace is None or self.best == self.trace.source:
            return
        spent = self.stats.for_pass("retrace").seconds
        if spent > self.RETRACE_SHARE * max(self.stats.wall_time, time.monotonic() - self._t0):
            return
        self._check_time()
        self._pass = "retrace"
        self._progress()
        t0 = time.monotonic()
        try:
            fresh = self.retrace(self.best)
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
            self.trace = fresh
            self.stats.retraces += 1

    def _close_pool(self) -> None:
        if self._pool is None:
            return
        # Runs made ahead and still going when the search ends are not needed: stopped, like
        # every run at a timeout or Ctrl-C, so that no candidate outlives the search.
        early = self.stats.status in ("timeout", "interrupted") or any(
            not f.done() for f in [*self._inflight.values(), *self._cancelled])
        if early:
            from reducer.runner import stop_runs_in_flight
            stop_runs_in_flight()
        # Waiting is short once the runs in flight are told to stop.
        self._pool.shutdown(wait=early, cancel_futures=True)
        self._pool = None
        if early:
            from reducer.runner import allow_runs
            allow_runs()

    def _format_after_time_limit(self) -> None:
        """The search stopped at its deadline, which keeps a reserve: lay the best out in it
        (the runs still going are stopped first, so the reserve is the layout's)."""
        self._searching = False
        if not self.format_result:
            return
        self._close_pool()
        try:
            self._format()
        except (DeadlineReached, _External):
            pass        # no time left after all, or the run failed: the best stands as it is

    def _format(self) -> None:
        """Lay the result out as a person would; the layout is kept only if it still fails the
        same way (hoisting an import can matter), so it costs at most two runs."""
        from reducer.format import format_source, tidy
        self._pass = "format"
        t0 = time.monotonic()
        try:
            for candidate in (format_source(self.best), tidy(self.best)):
                if candidate is None or candidate == self.best or not parses(candidate, self.compile_check):
                    continue
                key = _key(candidate)
                ok = self.seen[key] if key in self.seen else self._run_here(candidate, key)
                if ok:
                    self.best, self.best_size = candidate, size_of(candidate)
                    self.stats.for_pass("format").accepted += 1
                    self._refresh_stats()
                    if self.on_accept is not None:
                        self.on_accept(candidate, self.stats.to_dict())
                    break
        finally:
            self.stats.for_pass("format").seconds += time.monotonic() - t0


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
