"""Contracts for what one run produced: Frame, TracebackRecord, Outcome."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Frame:
    """One traceback frame as printed: the raw path, line number and function name."""

    path: str
    lineno: int | None
    func: str
    line: str = ""  # the source line printed under the frame, if any

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Frame":
        return cls(d["path"], d.get("lineno"), d["func"], d.get("line", ""))


@dataclass(frozen=True)
class TracebackRecord:
    """One exception found in a run's output.

    ``exc_type`` is the qualified name as Python printed it (``KeyError``,
    ``torch.OutOfMemoryError``); ``message`` is the raw, possibly multi-line message.
    ``chain`` holds the earlier exceptions of a chained traceback ("During handling…",
    "The above exception was the direct cause…"), outermost cause first. ``kind`` is
    ``exception`` for a Python traceback and ``crash`` for a faulthandler dump or a
    signal exit. ``text`` is the traceback exactly as printed (for traceback.txt).
    """

    exc_type: str
    message: str
    frames: tuple[Frame, ...]
    text: str
    stream: str = "stderr"
    kind: str = "exception"
    chain: tuple["TracebackRecord", ...] = ()
    # "raised" when the run's exception recorder saw it, "printed" when the recorder ran but
    # this is only text in the output, "" when unknown (reducer/run/raised.py).
    origin: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "exc_type": self.exc_type,
            "message": self.message,
            "frames": [f.to_dict() for f in self.frames],
            "text": self.text,
            "stream": self.stream,
            "kind": self.kind,
            "chain": [c.to_dict() for c in self.chain],
            "origin": self.origin,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TracebackRecord":
        return cls(
            exc_type=d["exc_type"],
            message=d.get("message", ""),
            frames=tuple(Frame.from_dict(f) for f in d.get("frames", [])),
            text=d.get("text", ""),
            stream=d.get("stream", "stderr"),
            kind=d.get("kind", "exception"),
            chain=tuple(cls.from_dict(c) for c in d.get("chain", [])),
            origin=d.get("origin", ""),
        )

    @property
    def headline(self) -> str:
        first = self.message.splitlines()[0] if self.message else ""
        return f"{self.exc_type}: {first}" if first else self.exc_type


@dataclass
class Outcome:
    """What one run of a candidate produced.

    ``stdout``/``stderr`` are bounded (head and tail kept, the middle elided with a
    marker); ``tracebacks`` lists every traceback found in either stream, in the
    order printed, including ones logged by a process that exited 0 and a synthetic
    crash record for a signal exit without a Python traceback.
    """

    returncode: int | None
    wall_time: float
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    stopped_early: bool = False  # killed on purpose once the target signature appeared
    signal: str | None = None     # e.g. "SIGSEGV" when the process died by a signal
    timeout_reason: str | None = None  # "wall clock" or what reported a hang (an NCCL watchdog)
    pid: int | None = None  # the run's process (group) id, to check its GPU memory is released
    peak_rss: int = 0        # the process group's peak resident memory, sampled, in bytes
    over_memory: bool = False  # killed for using far more memory than the original run
    limit: str | None = None   # the run limit it hit, in one line (reducer/run/guard.py)
    tracebacks: list[TracebackRecord] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.tracebacks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "returncode": self.returncode,
            "wall_time": round(self.wall_time, 3),
            "timed_out": self.timed_out,
            "stopped_early": self.stopped_early,
            "signal": self.signal,
            "timeout_reason": self.timeout_reason,
            "peak_rss": self.peak_rss,
            "over_memory": self.over_memory,
            "limit": self.limit,
            "tracebacks": [t.to_dict() for t in self.tracebacks],
        }
