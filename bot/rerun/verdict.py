"""What one re-run of a repro says about the failure: gone, the same, or something else."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum

from bot.store import VERDICT_PASS, VERDICT_SAME
from reducer.failure.outcome import Outcome, TracebackRecord
from reducer.failure.ranks import PRIMARY, role
from reducer.failure.signature import MatchOptions, Signature, distinct_failures, find_match, signature_of


class Kind(str, Enum):
    PASS = VERDICT_PASS
    SAME = VERDICT_SAME
    DIFFERENT = "different failure"
    TIMEOUT = "timeout"
    NOT_INSTALLABLE = "not installable"
    ERROR = "could not run"


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    detail: str = ""               # the other failure's one-line signature, or why it could not run
    signature_id: str | None = None
    wall_time: float | None = None
    # a different failure's exception type and innermost library frames: with the target's, they
    # tell "the same bug, its message changed" from a new bug (bot/rerun/versions.py same_bug)
    exc_type: str | None = None
    frames: tuple[str, ...] = ()
    # the exceptions chained under a different failure, outermost cause first, each as its one-line
    # signature: a wrapper ("Failed to import X because of the following error (look up to see its
    # traceback)") names nothing, its cause names the package (bot/rerun/companions.py)
    causes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.kind is Kind.PASS

    def label(self) -> str:
        return f"{self.kind.value}: {self.detail}" if self.detail else self.kind.value

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kind"] = self.kind.value
        d["frames"] = list(self.frames)
        d["causes"] = list(self.causes)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Verdict":
        return cls(Kind(d["kind"]), d.get("detail", ""), d.get("signature_id"), d.get("wall_time"),
                   d.get("exc_type"), tuple(d.get("frames") or ()), tuple(d.get("causes") or ()))


def classify(outcome: Outcome, target: Signature, options: MatchOptions) -> Verdict:
    """PASS only for a run that ended by itself, exit 0, with no traceback at all, or one whose
    only failure is a crash after its script ran to its end (``at_exit``; the detail says so): a
    hang or a crash while the script runs is never counted as fixed."""
    wall = round(outcome.wall_time, 2)
    if find_match(outcome.tracebacks, target, options) is not None:
        return Verdict(Kind.SAME, "", target.id, wall)
    if outcome.timed_out:
        return Verdict(Kind.TIMEOUT, f"no result after {outcome.wall_time:.0f}s", None, wall)
    others = distinct_failures(outcome, options)
    late = [sig for sig, record in others if at_exit(record)]
    others = [(sig, record) for sig, record in others if not at_exit(record)]
    if late and all(role(record) != PRIMARY for _, record in others):
        # a launcher's "a child failed" (torchrun's ChildFailedError) or a peer's lost connection
        # reports that crash at exit again, and says nothing of its own
        others = []
    if others:
        sig, record = others[0]
        causes = tuple(signature_of(cause, options).one_line() for cause in record.chain)
        return Verdict(Kind.DIFFERENT, sig.one_line(), sig.id, wall, sig.exc_type, sig.frames, causes)
    if late:
        return Verdict(Kind.PASS, f"ran to its end, then crashed at exit ({late[0].one_line()})", None, wall)
    if outcome.returncode != 0:
        how = outcome.signal or f"exit {outcome.returncode}"
        return Verdict(Kind.DIFFERENT, f"{how} without a traceback", None, wall)
    return Verdict(Kind.PASS, "", None, wall)


def at_exit(record: TracebackRecord) -> bool:
    """A fatal-error dump in which no thread had a Python frame: the interpreter was past the script,
    finalizing, when it crashed. gloo's process groups abort so at teardown on a loaded machine
    ("terminate called without an active exception", one run in five under ``accelerate launch``),
    whatever the script did. The script's own code ran to its end, so the failure it is judged on
    did not happen; a crash while the script runs always shows the script's frames."""
    return (record.kind == "crash" and record.exc_type == "FatalPythonError"
            and "<no Python frame>" in record.text and 'File "' not in record.text)
