"""result.json: what the reproduce job says happened, and the publish job's check of it.

The reproduce job runs the public's code, so everything it uploads may have been tampered
with by that code. ``ActionResult.from_untrusted`` is the one door: every field is
type-checked and length-bounded, the status must be one of ``STATUSES``, and anything that
fails is refused as a whole (the reply then says the run could not be read).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reducer.errors import ExitCode, ReprobotError

SCHEMA = 1
RESULT_FILE = "result.json"
REPRO_SUBDIR = "repro"
MAX_RESULT_BYTES = 64 * 1024
MAX_TEXT = 2000

# What happened, in the order the reproduce job can stop at.
STATUSES = (
    "ignored",          # not the configured label: nothing ran, nothing is posted
    "not-allowed",      # the gate said no: nothing ran, nothing is posted
    "too-large",        # the body is over the size cap
    "edited",           # the body changed after the label was added: not run (bot/action/freshness.py)
    "not-isolated",     # this runner cannot isolate the posted code, so it did not run it
    "no-script",        # no Python code block
    "attachment-only",  # the only script is an attached file reprobot does not run (a .py, a .zip)
    "attachment-error", # an attached notebook or test file could not be fetched (its host, size, the download)
    "syntax-error",     # the script does not parse
    "no-failure",       # it ran to the end without a traceback
    "timeout",          # it ran past the time limit without failing
    "flaky",            # it failed once and not again
    "error",            # reprobot itself could not finish (its message says why)
    "reproduced",       # it failed; the failure is recorded but not reduced
    "reduced",          # it failed and was reduced
)
SILENT = frozenset({"ignored", "not-allowed"})


@dataclass
class ActionResult:
    status: str
    discussion: int | None = None
    block: int | None = None            # which code block was the script (1-based)
    candidates: int = 0                 # how many Python code blocks there were
    marked: bool = False
    why: str = ""                       # why that block, or why none
    syntax_error: str | None = None
    requirements: list[str] = field(default_factory=list)
    rejected_requirements: list[str] = field(default_factory=list)
    requirements_installed: bool = False
    attachments: int = 0
    body_bytes: int = 0
    max_body: int = 0
    max_time: float = 0.0               # bound on the whole reduction, seconds
    timeout: float = 0.0                # bound on one run, seconds
    reduce_exit: int | None = None
    wall_time: float = 0.0
    detail: str = ""                    # one line from reprobot (scrubbed), e.g. why it stopped
    steps: dict[str, int | None] = field(default_factory=dict)   # route/dedup/draft exit codes
    isolation: str = ""                 # "namespaces" or "none" (bot/action/sandbox.py)
    body_sha256: str = ""               # the body this run read (the event's), quoted in the reply
    hidden: int = 0                     # Python code blocks a reader does not see (never run)
    hidden_why: str = ""                # where the first of them is ("inside a collapsed <details>")
    info_marker: int | None = None      # a block marked only in its info string (not honoured)
    attachment: str = ""                # the attached file that ran instead of a code block (its name)
    schema: int = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, folder: Path) -> Path:
        from bot.store import write_json_atomic
        path = folder / RESULT_FILE
        write_json_atomic(path, self.to_dict())
        return path

    @classmethod
    def from_untrusted(cls, data: Any) -> "ActionResult":
        if not isinstance(data, dict):
            raise _bad("not an object")
        if data.get("schema") != SCHEMA:
            raise _bad(f"schema {data.get('schema')!r}, expected {SCHEMA}")
        if data.get("status") not in STATUSES:
            raise _bad("unknown status")
        kwargs: dict[str, Any] = {"status": data["status"]}
        for name, check in _CHECKS.items():
            if name in data:
                kwargs[name] = check(name, data[name])
        return cls(**kwargs)

    @classmethod
    def read_untrusted(cls, folder: Path) -> "ActionResult":
        path = folder / RESULT_FILE
        if path.is_symlink() or not path.is_file():
            raise _bad("missing")
        if path.stat().st_size > MAX_RESULT_BYTES:
            raise _bad(f"over {MAX_RESULT_BYTES} bytes")
        try:
            data = json.loads(path.read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise _bad("not JSON") from None
        return cls.from_untrusted(data)


def _bad(why: str) -> ReprobotError:
    return ReprobotError(f"artifact {RESULT_FILE}: {why}", ExitCode.BAD_INPUT)


def _opt_int(name: str, v: Any) -> int | None:
    if v is None:
        return None
    return _int(name, v)


def _int(name: str, v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not -(2 ** 31) < v < 2 ** 31:
        raise _bad(f"{name} is not an integer")
    return v


def _num(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 10 ** 7:
        raise _bad(f"{name} is not a number")
    return float(v)


def _bool(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise _bad(f"{name} is not a boolean")
    return v


def _text(name: str, v: Any) -> str:
    if not isinstance(v, str) or len(v) > MAX_TEXT:
        raise _bad(f"{name} is not a string of at most {MAX_TEXT} characters")
    return v


def _opt_text(name: str, v: Any) -> str | None:
    return None if v is None else _text(name, v)


def _texts(name: str, v: Any) -> list[str]:
    if not isinstance(v, list) or len(v) > 100:
        raise _bad(f"{name} is not a list of at most 100 strings")
    return [_text(name, x) for x in v]


def _steps(name: str, v: Any) -> dict[str, int | None]:
    if not isinstance(v, dict) or len(v) > 10:
        raise _bad(f"{name} is not a small object")
    return {_text(name, k)[:40]: _opt_int(name, x) for k, x in v.items()}


_CHECKS = {
    "discussion": _opt_int, "block": _opt_int, "candidates": _int, "marked": _bool, "why": _text,
    "syntax_error": _opt_text, "requirements": _texts, "rejected_requirements": _texts,
    "requirements_installed": _bool, "attachments": _int, "body_bytes": _int, "max_body": _int,
    "max_time": _num, "timeout": _num, "reduce_exit": _opt_int, "wall_time": _num, "detail": _text,
    "steps": _steps, "isolation": _text, "body_sha256": _text, "hidden": _int, "hidden_why": _text,
    "info_marker": _opt_int, "attachment": _text,
}
