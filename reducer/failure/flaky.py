"""A failure that shows only in some runs: its rate, measured and kept, and what the reduction
may conclude from a few runs of a candidate.

The original is confirmed as before: ``--runs`` runs (default 2) that all fail the same way make
it deterministic, at no extra cost. Only when one of them passes or fails differently is the rate
measured further, to the cap (``--flaky-runs``, default 10). A flaky
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

EARLY = 3                 # failing runs in a row that make a fixed seed deterministic
DEFAULT_CAP = 10          # runs of a flaky original, at most (--flaky-runs)
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


def keep_running(failed: int, runs: int, confirm: int, cap: int = DEFAULT_CAP) -> bool:
    """The sequential rule for the original: while every run failed the same way, ``confirm``
    runs (``--runs``) are enough, exactly what a deterministic failure always cost; once one
    did not, the rate is measured to ``cap`` runs (never fewer than ``confirm``)."""
    if failed == runs:
        return runs < confirm
    return runs < max(cap, confirm)


def seed_lines(source: str, seed: int) -> list[str]:
    """The statements that fix the seeds: ``random``'s, and numpy's/torch's when the script imports them."""
    lines = [f"import random; random.seed({seed})  # fixed seed (reprobot: the failure is deterministic with it)"]
    if re.search(r"^\s*(import|from)\s+numpy\b", source, re.MULTILINE):
        lines.append(f"import numpy; numpy.random.seed({seed})")
    if re.search(r"^\s*(import|from)\s+torch\b", source, re.MULTILINE):
        lines.append(f"import torch; torch.manual_seed({seed})")
    return lines


def seed_calls(source: str, seed: int) -> list[str]:
    """What a seeded candidate must still contain (a candidate without its seed is flaky again)."""
    return [line.split(";", 1)[1].split("#", 1)[0].strip() for line in seed_lines(source, seed)]


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
    lines = seed_lines(source, seed)
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
