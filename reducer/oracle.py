"""The oracle: run a candidate and say whether it fails with the target Signature."""
from __future__ import annotations

import threading
from dataclasses import dataclass

from reducer.gpu import GpuPool
from reducer.outcome import Outcome
from reducer.runner import Runner
from reducer.signature import MatchOptions, Signature, find_match

# A candidate may legitimately run somewhat slower than the original (noise, a cold
# cache), but one that makes the model 100x bigger is rejected, not waited on.
TIMEOUT_FACTOR = 3.0
TIMEOUT_FLOOR = 5.0


def candidate_timeout(original_wall: float) -> float:
    return max(TIMEOUT_FLOOR, original_wall * TIMEOUT_FACTOR + 2.0)


def candidate_memory(original_peak_rss: int) -> int | None:
    """Resident-memory cap for a candidate, from the original's peak (None when unknown)."""
    if original_peak_rss <= 0:
        return None
    return max(3 * original_peak_rss, original_peak_rss + 2 * 1024 ** 3)


@dataclass
class Verdict:
    interesting: bool
    outcome: Outcome


class Oracle:
    def __init__(self, runner: Runner, target: Signature, options: MatchOptions,
                 timeout: float | None = None, stop_early: bool = True,
                 gpus: GpuPool | None = None, max_rss: int | None = None,
                 allow_hang: bool = False, stop_grace: float = 2.0) -> None:
        self.runner = runner
        # A candidate that shows the failure but then does not exit is only as good as the
        # original when the original did not exit either (a worker loop waiting for jobs).
        self.allow_hang = allow_hang
        self.stop_grace = stop_grace
        self.max_rss = max_rss
        self.gpus = gpus or GpuPool([])
        self.target = target
        self.options = options
        self.timeout = timeout
        self.stop_early = stop_early
        self.runs = 0
        self.run_seconds = 0.0
        self._lock = threading.Lock()

    def _hit(self, records) -> bool:
        return find_match(records, self.target, self.options) is not None

    def test(self, source: str) -> Verdict:
        with self.gpus.acquire() as slot:
            outcome = self.runner.run(
                source, timeout=self.timeout,
                extra_env={"CUDA_VISIBLE_DEVICES": slot.gpu} if slot.gpu is not None else None,
                stop_when=self._hit if self.stop_early else None, max_rss=self.max_rss,
                stop_grace=self.stop_grace)
            slot.pgid = outcome.pid
        with self._lock:
            self.runs += 1
            self.run_seconds += outcome.wall_time
        hangs = outcome.stopped_early or outcome.timed_out
        return Verdict(self._hit(outcome.tracebacks) and (self.allow_hang or not hangs), outcome)

    def __call__(self, source: str) -> bool:
        return self.test(source).interesting
