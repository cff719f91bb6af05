"""The Signature: what "the same failure" means.

A Signature is the exception's qualified type, its normalised message and the
innermost library frames (package-relative file + function, no line numbers), with
the user's own frames left out because reduction rewrites the user's script.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from reducer.failure.normalize import (PLUMBING, failing_frames, library_frames, library_path,  # noqa: F401 (re-exported)
                                       normalize_message)
from reducer.failure.outcome import Outcome, TracebackRecord
from reducer.failure.tracebacks import all_records
from reducer.run.raised import PRINTED

DEFAULT_FRAMES = 3


@dataclass(frozen=True)
class MatchOptions:
    """How strict a match is: how many innermost library frames count, and the message or not."""

    frames: int = DEFAULT_FRAMES
    ignore_message: bool = False
    # "cuda:0 and cpu" vs "cuda:1 and cpu": the same bug on a multi-GPU box, unless the
    # device index is the point. Kept by default.
    normalize_devices: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"frames": self.frames, "ignore_message": self.ignore_message,
                "normalize_devices": self.normalize_devices}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MatchOptions":
        return cls(int(d.get("frames", DEFAULT_FRAMES)), bool(d.get("ignore_message", False)),
                   bool(d.get("normalize_devices", False)))


@dataclass(frozen=True)
class Signature:
    exc_type: str
    message: str | None  # None when the match ignores the message
    frames: tuple[str, ...] = field(default=())  # "pkg/file.py:func", innermost first

    @property
    def id(self) -> str:
        canon = json.dumps([self.exc_type, self.message, list(self.frames)], separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:10]

    def one_line(self) -> str:
        head = self.exc_type if self.message in (None, "") else f"{self.exc_type}: {self.message}"
        if len(head) > 160:
            head = head[:157] + "..."
        return head + (" @ " + " < ".join(self.frames) if self.frames else "")

    def __str__(self) -> str:
        return self.one_line()

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "exc_type": self.exc_type, "message": self.message,
                "frames": list(self.frames), "one_line": self.one_line()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Signature":
        return cls(d["exc_type"], d.get("message"), tuple(d.get("frames", ())))


def signature_of(record: TracebackRecord, options: MatchOptions = MatchOptions()) -> Signature:
    frames = tuple(failing_frames(record)[: max(options.frames, 0)])
    message = (None if options.ignore_message
               else normalize_message(record.message, keep_devices=not options.normalize_devices))
    return Signature(record.exc_type, message, frames)


def distinct_failures(outcome: Outcome, options: MatchOptions = MatchOptions()) -> list[tuple[Signature, TracebackRecord]]:
    """The distinct failures of a run, one record each: first-seen order, except that
    exceptions the run raised come before tracebacks it only printed (reducer/run/raised.py), and a
    process's own failure comes before the other ranks' secondary failures, and those before a
    parent's wrapper that only says a child failed (reducer/failure/ranks.py: a wrapper is never a
    target)."""
    from reducer.failure.ranks import role
    seen: dict[Signature, TracebackRecord] = {}
    records = list(all_records(outcome.tracebacks))
    records.sort(key=lambda r: (role(r), r.origin == PRINTED))  # stable: first-seen order otherwise
    for record in records:
        sig = signature_of(record, options)
        seen.setdefault(sig, record)
    return list(seen.items())


def matches(outcome: Outcome, target: Signature, options: MatchOptions = MatchOptions()) -> bool:
    """True iff any failure in the outcome has the target signature under these options."""
    return find_match(outcome.tracebacks, target, options) is not None


def find_match(records: Iterable[TracebackRecord], target: Signature,
               options: MatchOptions = MatchOptions(), *, as_itself: bool = False,
               raised: bool = False) -> TracebackRecord | None:
    """The record showing the target failure. ``as_itself``: only a failure reported as itself
    counts, not one that appears only as the context or cause of a different exception (a
    reduction that broke an ``except`` handler shows the target only that way). ``raised``:
    text that only looks like the failure (printed, never raised) does not count."""
    for r in (list(records) if as_itself else all_records(list(records))):
        if raised and r.origin == PRINTED:
            continue
        if signature_of(r, options) == target:
            return r
    return None
