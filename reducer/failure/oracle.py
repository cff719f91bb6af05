"""The oracle: run a candidate and say whether it fails with the target Signature."""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import PurePath

import time

from reducer.errors import DeadlineReached
from reducer.failure.flaky import MAX_CANDIDATE_RUNS, clean_runs_to_refuse
from reducer.failure.normalize import library_path
from reducer.failure.outcome import Outcome
from reducer.failure.ranks import _COLLISION as _COLLISION_TEXT, is_collision
from reducer.failure.signature import MatchOptions, Signature, find_match
from reducer.run.gpu import GpuPool
from reducer.run.slots import CandidateRunner, accepts_cancel

COLLISION_RETRIES = 2

# A candidate may legitimately run somewhat slower than the original (noise, a cold
# cache), but one that makes the model 100x bigger is rejected, not waited on.
TIMEOUT_FACTOR = 3.0
TIMEOUT_FLOOR = 5.0


def candidate_timeout(original_wall: float) -> float:
    return max(TIMEOUT_FLOOR, original_wall * TIMEOUT_FACTOR + 2.0)


def candidate_memory(original_peak_rss: int) -> int | None:
    """Resident-memory cap for a candidate, from the original's peak (None when unknown).

    A repro is never heavier than the script it comes from: shrinking ``hidden_size=32`` away
    brings back a default-sized model (a 768-wide, 16-layer vision tower took a 0.43 GB example
    to 1.73 GB; a dropped ``num_hidden_layers`` took a 422 MB script to 544 MB), which is not a
    simplification a maintainer wants to run. The slack covers the sampling and the allocator, not
    a bigger model; the final verification is stricter still (reducer/reduction/cold_verdict.py ``heavier``)."""
    if original_peak_rss <= 0:
        return None
    return original_peak_rss + max(original_peak_rss // 5, 96 * 1024 ** 2)


@dataclass
class Verdict:
    interesting: bool
    outcome: Outcome


class Oracle:
    def __init__(self, runner: CandidateRunner, target: Signature, options: MatchOptions,
                 timeout: float | None = None, stop_early: bool = True,
                 gpus: GpuPool | None = None, max_rss: int | None = None,
                 allow_hang: bool = False, stop_grace: float = 2.0, as_itself: bool = False,
                 raised: bool = False, rate: float = 1.0, required: tuple[str, ...] = ()) -> None:
        self.runner = runner
        self.set_rate(rate, required)
        # The original reported the target as itself: a candidate must too (see find_match);
        # the original raised it: printed text that looks like it is not enough.
        self.as_itself = as_itself
        self.raised = raised
        # A candidate that shows the failure but then does not exit is only as good as the
        # original when the original did not exit either (a worker loop waiting for jobs).
        self.allow_hang = allow_hang
        self.stop_grace = stop_grace
        self.max_rss = max_rss
        self.gpus = gpus or GpuPool([])
        self.target = target
        self.options = options
        self.timeout = timeout
        # A warm run's bound, from the original's warm run: a candidate that hangs (a worker
        # called where it waits on a queue nobody fills) costs that, not three cold runs.
        self.warm_timeout: float | None = None
        # ...and its memory bound, from the same run: a warm run is measured as a fork of the warm
        # image (its pages counted in every process of the group), and a launch line's cold ranks
        # are not in the group at all (torchrun starts each in a session of its own).
        self.warm_max_rss: int | None = None
        self.stop_early = stop_early
        self.runs = 0
        self.collisions = 0   # runs repeated because their rendezvous port was taken
        self._target_is_collision = bool(_COLLISION_TEXT.search(f"{target.exc_type}: {target.message or ''}"))
        self.run_seconds = 0.0
        # The whole command's deadline (time.monotonic()): a run is cut there, and a cut run
        # has no verdict (it must not be cached as "not interesting").
        self.deadline: float | None = None
        # The GPU set the original's failure was confirmed on (warm check, cold verdicts use it).
        self.reference_set: tuple[str, ...] | None = None
        self._lock = threading.Lock()
        # where each recent interesting candidate failed (its own lines), for the slicing pass
        self._failure_lines: OrderedDict[str, tuple[int, ...]] = OrderedDict()

    def set_rate(self, rate: float, required: tuple[str, ...] = ()) -> None:
        """The original's failure rate (reducer/failure/flaky.py) and the text every candidate must keep
        (the fixed seed a flaky failure is deterministic with: without it a candidate would only
        fail by luck, so it is refused unrun). Set again when a later run showed the failure to
        be flaky (reducer/failure/original.py:remeasure)."""
        self.required = tuple(required)
        # below 1, a clean pass is a draw, not a verdict
        self.rate = rate
        self.refuse_after = clean_runs_to_refuse(rate)
        # a failure in every run is told from the original's rate only when that takes few runs
        high = clean_runs_to_refuse(1.0 - rate) if rate < 1.0 else None
        self.fails_to_refuse = high if high is not None and high <= MAX_CANDIDATE_RUNS else None
    def _collided(self, outcome: Outcome) -> bool:
        if self._target_is_collision:
            return False
        return any(is_collision(r) for r in outcome.tracebacks)

    def _hit(self, records) -> bool:
        return find_match(records, self.target, self.options, as_itself=self.as_itself, raised=self.raised) is not None

    def test(self, source: str, warm: bool = True, gpu_set: tuple[str, ...] | None = None,
             gpu_count: int | None = None, alone: bool = False,
             cancel: threading.Event | None = None) -> Verdict:
        """For a flaky original, a candidate is run until its runs are consistent with the
        original's rate: it failed the same way and also passed cleanly (accepted); it passed
        cleanly ``refuse_after`` times in a row, or failed ``fails_to_refuse`` times in a row
        (refused: no longer, or now always, failing — a value inlined that made the raise
        unconditional is not the original's bug). A different failure or a hang is refused at
        once: the original only ever failed this way or passed. ``cancel``: set, the run in
        progress stops (the search no longer needs its verdict)."""
        if self.required and not all(r in source for r in self.required):
            return Verdict(False, Outcome(returncode=None, wall_time=0.0))
        if self.rate >= 1.0:
            return self._test_once(source, warm, gpu_set, gpu_count, alone, cancel)
        fails = passes = 0
        hit = None
        while True:
            verdict = self._test_once(source, warm, gpu_set, gpu_count, alone, cancel)
            o = verdict.outcome
            if verdict.interesting:
                fails, hit = fails + 1, verdict
            elif o.tracebacks or o.timed_out or o.returncode != 0:
                return verdict
            else:
                passes += 1
            if hit is not None and (passes or self.fails_to_refuse is None):
                return hit
            if passes >= self.refuse_after:
                return verdict
            if self.fails_to_refuse is not None and fails >= self.fails_to_refuse:
                return Verdict(False, hit.outcome if hit else o)

    def _test_once(self, source: str, warm: bool, gpu_set: tuple[str, ...] | None,
                   gpu_count: int | None, alone: bool, cancel: threading.Event | None = None) -> Verdict:
        """``warm=False``: a cold run even when the runner has warm interpreters. ``gpu_set``: run on
        exactly that set of the pool (the one the original's failure was confirmed on), waiting
        for it; ``gpu_count``: only the set's first N GPUs visible (the one-GPU check); ``alone``:
        a cold run of the source by itself in an empty folder, offline (``Runner.run``)."""
        timeout, cut = self.timeout, False
        max_rss = self.max_rss
        if warm and not alone and getattr(self.runner, "zygotes", None) is not None:
            if self.warm_timeout is not None:
                timeout = self.warm_timeout
            if self.warm_max_rss is not None:
                max_rss = self.warm_max_rss
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise DeadlineReached
            if timeout is None or left < timeout:
                timeout, cut = left, True
        for attempt in range(COLLISION_RETRIES + 1):
            with self.gpus.acquire(gpu_set) as slot:
                outcome = self.runner.run(
                    source, timeout=timeout, extra_env=slot.env(gpu_count),
                    stop_when=self._hit if self.stop_early else None, max_rss=max_rss,
                    stop_grace=self.stop_grace, warm=warm, **({"alone": True} if alone else {}),
                    **({"cancel": cancel} if cancel is not None and accepts_cancel(self.runner.run) else {}))
                slot.pgid = outcome.pid
            if cut and outcome.timed_out:
                raise DeadlineReached
            # A rendezvous port some other process took (EADDRINUSE) says nothing about the
            # candidate: it is run again on a fresh port, and never counted as a match.
            if not self._collided(outcome):
                break
            with self._lock:
                self.collisions += 1
        with self._lock:
            self.runs += 1
            self.run_seconds += outcome.wall_time
        hangs = outcome.stopped_early or outcome.timed_out
        record = find_match(outcome.tracebacks, self.target, self.options, as_itself=self.as_itself,
                            raised=self.raised)
        interesting = record is not None and (self.allow_hang or not hangs) and not self._collided(outcome)
        if interesting:
            self._remember(source, record)
        return Verdict(interesting, outcome)

    def _remember(self, source: str, record) -> None:
        name = PurePath(self.runner.spec.script).name
        lines = tuple(f.lineno for f in record.frames
                      if f.lineno and PurePath(f.path).name == name and library_path(f.path) is None)
        with self._lock:
            self._failure_lines[source] = lines
            while len(self._failure_lines) > 64:
                self._failure_lines.popitem(last=False)

    def failure_lines(self, source: str) -> tuple[int, ...] | None:
        """The script's own traceback lines in the run that found ``source`` interesting."""
        with self._lock:
            return self._failure_lines.get(source)

    def __call__(self, source: str, cancel: threading.Event | None = None) -> bool:
        return self.test(source, cancel=cancel).interesting
