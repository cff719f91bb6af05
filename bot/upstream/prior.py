"""Where failures like this one were filed: a naive Bayes model over the issue index.

The neighbour vote (neighbours.py) speaks only when an indexed failure is close enough to be the
same one. This model speaks for every failure: each indexed issue with an error contributes its
words (exception type, message, library frames, the call its thread shows) to the repository it
was filed at, or the one its fix landed in, and a new failure's words are weighed against every
repository's. It is learned from whatever the user's index holds (the bundled known issues, then
every synced issue), so it follows the repositories as they are, not rules written against a
sample.

The model is rebuilt when the index changes (count and newest update), once per process.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from bot.targets import stack_packages, targets

ALPHA = 0.5
# Posteriors of naive Bayes are far too sure of themselves (words are not independent): scores are
# divided by this before the softmax, so a share reads as a vote, not a certainty.
TEMPERATURE = 4.0
MIN_DOCS = 20          # fewer indexed failures than this: no model
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_STOP = frozenset(["the", "and", "for", "not", "are", "was", "with", "this", "that", "has", "have", "but", "you",
                   "object", "none", "true", "false", "from", "can", "should", "must", "when", "got", "expected"])


def features(exc_type: str | None, message: str | None, frames: Iterable[str] = (),
             call: str | None = None) -> set[str]:
    """The words a failure is weighed by. Frames are ``pkg/dir/file.py:func``."""
    out: set[str] = set()
    if exc_type:
        out.add("exc:" + exc_type.rsplit(".", 1)[-1])
    for w in _WORD.findall(message or ""):
        low = w.lower()
        if low not in _STOP:
            out.add(low)
            out.update(p for p in low.split("_") if len(p) > 2 and p not in _STOP)
    for frame in frames:
        path = frame.rsplit(":", 1)[0]
        parts = path.split("/")
        out.add("pkg:" + parts[0])
        if len(parts) > 1:
            out.add("dir:" + "/".join(parts[:2]))
        out.add("file:" + path)
    for w in _WORD.findall(call or ""):
        out.add("call:" + w.lower())
    return out


@dataclass
class RepoPrior:
    docs: Counter = field(default_factory=Counter)                 # repo -> issues
    counts: dict[str, Counter] = field(default_factory=dict)       # repo -> feature -> issues
    vocab: set[str] = field(default_factory=set)
    by_ref: dict[tuple[str, int], tuple[str, frozenset[str]]] = field(default_factory=dict)

    def add(self, label: str, key: tuple[str, int], feats: set[str]) -> None:
        """``label``: the repository the issue counts for; ``key``: (its repository, number)."""
        self.docs[label] += 1
        self.counts.setdefault(label, Counter()).update(feats)
        self.vocab |= feats
        self.by_ref[key] = (label, frozenset(feats))

    @property
    def size(self) -> int:
        return sum(self.docs.values())

    def shares(self, feats: set[str], excluded: tuple[str, int] | None = None) -> dict[str, float]:
        """Repository -> share of belief (sums to 1). ``excluded``: an indexed issue that is not
        counted (the query itself, when evaluating)."""
        docs, left_out, minus = Counter(self.docs), None, frozenset()
        if excluded in self.by_ref:
            left_out, minus = self.by_ref[excluded]
            docs[left_out] -= 1
        if sum(docs.values()) < MIN_DOCS:
            return {}
        known = [f for f in feats if f in self.vocab]
        total = sum(docs.values())
        scores: dict[str, float] = {}
        for repo, n in docs.items():
            if n <= 0:
                continue
            counts = self.counts[repo]
            s = math.log(n / total)
            for f in known:
                c = counts[f] - (repo == left_out and f in minus)
                s += math.log((c + ALPHA) / (n + 2 * ALPHA))
            scores[repo] = s / TEMPERATURE
        if not scores:
            return {}
        top = max(scores.values())
        exp = {r: math.exp(s - top) for r, s in scores.items()}
        z = sum(exp.values())
        return {r: v / z for r, v in sorted(exp.items(), key=lambda kv: -kv[1])}


def landed_repo(repo: str, fixed_by: list[str], ours: set[str]) -> str:
    """Where the issue's fix landed, when its thread names fixing PRs in one other of our repos."""
    fixes = {ref.split("#", 1)[0] for ref in fixed_by if "#" in ref} & ours
    return next(iter(fixes)) if len(fixes) == 1 else repo


_CACHE: dict[tuple[Any, ...], RepoPrior] = {}


def prior_of(index: Any) -> RepoPrior:
    """The model for ``index`` (rebuilt when its contents change)."""
    conn = index.conn
    count, newest = conn.execute("SELECT count(*), max(updated_at) FROM issues").fetchone()
    key = (id(conn), str(getattr(index, "path", "")), count, newest)
    if key in _CACHE:
        return _CACHE[key]
    ours = {t.repo for t in targets() if t.packages[0] in stack_packages()}
    model = RepoPrior()
    rows = conn.execute("SELECT repo, number, exc_type, error_line, frames, fixed_by FROM issues "
                        "WHERE is_pr = 0 AND exc_type IS NOT NULL AND error_line IS NOT NULL")
    for repo, number, exc_type, error_line, frames, fixed_by in rows:
        label = landed_repo(repo, json.loads(fixed_by), ours)
        if label not in ours:
            continue
        message = error_line.split(": ", 1)[1] if ": " in error_line else error_line
        model.add(label, (repo, number), features(exc_type, message, json.loads(frames)))
    _CACHE.clear()
    _CACHE[key] = model
    return model
