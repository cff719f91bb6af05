"""A failure that shows only in some runs: its rate, measured and kept, and what the reduction
may conclude from a few runs of a candidate.

The original is run until the rate is known well enough: three failures in the first three runs
stop early (a deterministic failure), anything else runs to the cap (``--runs``). A flaky
failure is first tried with fixed seeds (``random``, and ``numpy``/``torch`` when the script
imports them, set by a preamble at the top of the script): a seed under which it fails every
time is the best repro there is. Otherwise each candidate is run until it fails the same way
(accepted) or passes cleanly as many times in a row as a failure at the original's rate would
only ``ALPHA`` of the time (refused); a candidate that fails *differently* is refused at once,
since the original never did, so most refusals cost one run.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

EARLY = 3                 # failures in the first EARLY runs: deterministic, stop
DEFAULT_CAP = 10          # runs of a flaky original, at most (--runs)
ALPHA = 0.125             # chance of refusing a candidate that still fails at the original's rate
MAX_CANDIDATE_RUNS = 8    # a rate needing more clean runs than this per refusal is too rare to reduce
SEED_TRIES = 4            # seeds tried, each confirmed by EARLY failing runs


@dataclass(frozen=True)
class Rate:
    failed: int
    runs: int

    @property
    def value(self) -> float:
        return self.failed / self.runs if self.runs else 0.0

    @property
    def deterministic(self) -> bool:
        return self.runs > 0 and self.failed == self.runs

    def words(self) -> str:
        return f"fails in {self.failed} of {self.runs} runs"

    def to_dict(self) -> dict:
        return {"failed": self.failed, "runs": self.runs}

    @classmethod
    def from_dict(cls, d: dict | None) -> "Rate | None":
        if not d or not d.get("runs"):
            return None
        return cls(int(d["failed"]), int(d["runs"]))


def keep_running(failed: int, runs: int, cap: int) -> bool:
    """The sequential rule for the original: stop on EARLY of EARLY, else run to the cap."""
    if runs >= cap:
        return False
    return not (failed == runs and runs >= min(EARLY, cap))


def clean_runs_to_refuse(rate: float) -> int:
    """Clean passes in a row after which a candidate is refused: (1 - rate)^n <= ALPHA."""
    if rate >= 1.0:
        return 1
    if rate <= 0.0:
        return 10 ** 6
    return max(1, math.ceil(math.log(ALPHA) / math.log(1.0 - rate)))


def too_rare(rate: float) -> bool:
    return clean_runs_to_refuse(rate) > MAX_CANDIDATE_RUNS


_FUTURE = re.compile(r"^\s*from\s+__future__\s+import\b")


def seeded_source(source: str, seed: int) -> str:
    """The script with fixed seeds set before anything else runs (after a docstring and
    ``from __future__`` imports, which must stay first)."""
    lines = [f"import random; random.seed({seed})  # fixed seed (reprobot: the failure is deterministic with it)"]
    if re.search(r"^\s*(import|from)\s+numpy\b", source, re.MULTILINE):
        lines.append(f"import numpy; numpy.random.seed({seed})")
    if re.search(r"^\s*(import|from)\s+torch\b", source, re.MULTILINE):
        lines.append(f"import torch; torch.manual_seed({seed})")
    import ast
    body = ast.parse(source).body
    at = 0
    for i, node in enumerate(body):
        is_doc = i == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) \
            and isinstance(node.value.value, str)
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if is_doc or is_future:
            at = node.end_lineno or at
        else:
            break
    src_lines = source.splitlines(keepends=True)
    return "".join(src_lines[:at]) + "\n".join(lines) + "\n" + "".join(src_lines[at:])


def loop_command(command: str, runs: int) -> str:
    return f"for i in $(seq {runs}); do {command} && echo passed || echo FAILED; done"
