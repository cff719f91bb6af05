"""What route, dedup and the neighbour vote read: the failing record (from a repro folder or a
pasted traceback), its frames with the package each belongs to, and the classes a frame's source
file on this machine defines."""
from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from bot.targets import checkout_parents, package_targets
from reducer.errors import ExitCode, ReprobotError
from reducer.failure.normalize import library_path, package_of
from reducer.failure.outcome import Frame, TracebackRecord
from reducer.failure.signature import PLUMBING
from reducer.failure.tracebacks import parse_tracebacks


@dataclass
class FailureReport:
    """A failure as routing and dedup see it: the failing record, from a repro folder or a pasted
    traceback, and what the folder adds. Unlike reducer/failure/original.py's ``Failure`` it holds no
    runner and no signature: it may come from a paste that was never run here."""

    record: TracebackRecord
    source: str                      # "repro folder <path>" | "pasted traceback"
    repro_source: str | None = None  # repro.py, when routed from a folder
    versions: dict[str, str] = field(default_factory=dict)  # env.json: package -> version
    repro_dir: Path | None = None
    raw_text: str | None = None      # the pasted text, when routed from --traceback
    # built.json: who made the tensors the failing line read (one run of the repro; None: not run)
    built: Any = None


def pick_record(records: list[TracebackRecord]) -> TracebackRecord:
    """The failure a pasted text is about: the last exception printed (a chained
    traceback ends with the one that escaped), preferring ones with frames."""
    if not records:
        raise ReprobotError("no Python traceback found in the input (expected 'Traceback (most recent call last):')",
                            ExitCode.BAD_INPUT)
    with_frames = [r for r in records if r.frames]
    return (with_frames or records)[-1]


# The last line of a traceback on its own: ``ValueError: ...`` or ``torch.OutOfMemoryError: ...``.
_ERROR_LINE = re.compile(r"^(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)"
                         r"|(?:[a-z_]\w*\.)+[A-Z]\w*(?<!Warning))"
                         r"(?::\s?(?P<message>.*))?$")


def error_line_record(text: str) -> TracebackRecord | None:
    """A paste that holds only the error line (an issue title, a log's last line): a record
    with no frames, so routing and dedup can still read the exception and its message."""
    lines = [ln.rstrip() for ln in text.strip().splitlines()]
    # The last error line (a log's earlier ones were handled); what follows it is its message.
    for n in reversed(range(len(lines))):
        m = _ERROR_LINE.match(lines[n].strip())
        if m:
            message = "\n".join([m.group("message") or ""] + lines[n + 1:]).strip()
            return TracebackRecord(m.group("exc"), message, (), "\n".join(lines[n:]) + "\n")
    return None


def failure_from_text(text: str) -> FailureReport:
    records = parse_tracebacks(text)
    if not records and (alone := error_line_record(text)) is not None:
        records = [alone]
    return FailureReport(pick_record(records), "pasted traceback", raw_text=text)


def read_traceback_arg(arg: str) -> str:
    """``--traceback FILE`` or ``-`` for stdin."""
    if arg == "-":
        return sys.stdin.read()
    p = Path(arg)
    if not p.is_file():
        raise ReprobotError(f"{arg}: no such file", ExitCode.FILE_MISSING)
    try:
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ReprobotError(f"{arg}: cannot read ({e.strerror})", ExitCode.FILE_MISSING) from None


def env_versions(env: Any) -> dict[str, str]:
    """package -> version from env.json, tolerant of its shape (``packages: {name: {version}}``)."""
    out: dict[str, str] = {}
    if not isinstance(env, dict):
        return out
    for key in ("packages", "versions"):
        section = env.get(key)
        if isinstance(section, dict):
            for name, info in section.items():
                if isinstance(info, str):
                    out[name.lower()] = info
                elif isinstance(info, dict) and isinstance(info.get("version"), str):
                    out[name.lower()] = info["version"]
    return out


def failure_from_repro(path: str | Path) -> FailureReport:
    from bot.store import ReproDir

    d = ReproDir.open(path)
    data = d.read_json(d.signature_json)
    if not isinstance(data, dict) or not isinstance(data.get("record"), dict):
        raise ReprobotError(f"{d.signature_json}: has no traceback record; run `reprobot reduce` again",
                            ExitCode.BAD_INPUT)
    try:
        record = TracebackRecord.from_dict(data["record"])
    except (KeyError, TypeError, ValueError) as e:
        raise ReprobotError(f"{d.signature_json}: malformed record ({e})", ExitCode.BAD_INPUT) from None
    repro = d.repro.read_text(encoding="utf-8") if d.repro.is_file() else None
    if repro is not None:
        record = _repro_record(d) or record
    versions = env_versions(d.read_json(d.env_json)) if d.env_json.is_file() else {}
    from bot.upstream.made import read_built
    return FailureReport(record, "repro folder", repro, versions, d.path, built=read_built(d.path))


def _repro_record(d: Any) -> TracebackRecord | None:
    """The reduced repro's own traceback (reduction.json), when the reduction recorded one: the
    original may have passed through packages the repro no longer touches."""
    data = d.read_json(d.reduction_json) if d.reduction_json.is_file() else None
    raw = data.get("repro_record") if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        return None
    try:
        return TracebackRecord.from_dict(raw)
    except (KeyError, TypeError, ValueError):
        return None


def load_failure(path: str | None, traceback_arg: str | None) -> FailureReport:
    """The CLI's two inputs: a repro folder, or ``--traceback FILE|-``."""
    if traceback_arg is not None:
        if path:
            raise ReprobotError("give a repro folder or --traceback, not both", ExitCode.USAGE)
        return failure_from_text(read_traceback_arg(traceback_arg))
    if not path:
        raise ReprobotError("give a repro folder (repros/<id>) or --traceback FILE ('-' for stdin)", ExitCode.USAGE)
    return failure_from_repro(path)


@dataclass(frozen=True)
class PathFrame:
    """A frame with what routing needs: its package (None: user code) and package path."""

    frame: Frame
    package: str | None
    rel: str | None

    @property
    def key(self) -> str:
        return f"{self.rel}:{self.frame.func}"

    @property
    def plumbing(self) -> bool:
        return self.key in PLUMBING


_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"<frozen", "runpy"}


def _alternatives(names: Iterable[str]) -> str:
    # Longest first, so one package name that prefixes another cannot shadow it.
    return "|".join(re.escape(n) for n in sorted(names, key=lambda n: (-len(n), n)))


@lru_cache(maxsize=8)
def _mangled(packages: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(rf"^(?P<pkg>{_alternatives(packages)})_(?P<rest>[^/]+\.py)$")


def unmangle(rel: str | None, pkg: str | None) -> tuple[str | None, str | None]:
    """Forums render ``torch\\_meta_registrations.py`` as ``torch_meta_registrations.py``
    (markdown eats the backslash of ``\\_``): put the package back. The packages are the
    targets' and the other ones routing recognises (targets.OTHER_CHECKOUTS)."""
    m = _mangled(tuple(checkout_parents())).match(rel or "")
    if m:
        return f"{m.group('pkg')}/_{m.group('rest')}", m.group("pkg")
    return rel, pkg


# A source checkout installed in editable mode ("pip install -e"): .../transformers/src/transformers/x.py,
# .../bitsandbytes/bitsandbytes/x.py, .../pytorch/torch/x.py. Not site-packages, still the library.
# Each target names the folder its checkout keeps the package in (Target.checkout_parent).
@lru_cache(maxsize=8)
def _checkout(parents: tuple[tuple[str, str], ...]) -> re.Pattern[str]:
    by_parent: dict[str, list[str]] = {}
    for pkg, parent in parents:
        by_parent.setdefault(parent, []).append(pkg)
    sep = r"[\\/]"
    alts = [rf"{re.escape(parent)}{sep}(?=(?:{_alternatives(pkgs)}){sep})" for parent, pkgs in by_parent.items()]
    return re.compile(rf"{sep}(?:{'|'.join(alts)})")


def _checkout_rel(path: str) -> tuple[str | None, str | None]:
    hits = list(_checkout(tuple(checkout_parents().items())).finditer(path or ""))
    if not hits:
        return None, None
    rel = path[hits[-1].end():].replace("\\", "/")
    return rel, rel.split("/", 1)[0]


def path_frames(record: TracebackRecord) -> list[PathFrame]:
    """Frames outermost first; stdlib frames dropped (they never own a bug here)."""
    targets_packages = package_targets()
    out = []
    for f in record.frames:
        rel = library_path(f.path)
        pkg = package_of(f.path) if rel else None
        if rel is None:
            # Routing a library frame as "user code" would say "not one of ours" wrongly.
            rel, pkg = _checkout_rel(f.path)
        rel, pkg = unmangle(rel, pkg)
        if pkg and pkg in _STDLIB and pkg not in targets_packages:
            continue
        out.append(PathFrame(f, pkg, rel))
    return out


@lru_cache(maxsize=64)
def classes_of(path: str) -> tuple[tuple[int, int, str], ...]:
    """(first line, last line, name) of each class in a source file; empty when unreadable."""
    try:
        # a scrubbed path (~/...) is this machine's home again
        tree = ast.parse(Path(path).expanduser().read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    return tuple((n.lineno, n.end_lineno or n.lineno, n.name) for n in ast.walk(tree) if isinstance(n, ast.ClassDef))


def enclosing_class(path: str, lineno: int | None) -> str | None:
    """The innermost class whose body holds ``path:lineno`` (the traceback names only the
    function); None when the file is not on this machine."""
    if not lineno or not path.endswith(".py"):
        return None
    inside = [c for c in classes_of(path) if c[0] <= lineno <= c[1]]
    return max(inside, key=lambda c: c[0])[2] if inside else None
