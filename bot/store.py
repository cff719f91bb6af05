"""The repros store: one folder per failure, ``repros/<slug>-<id>/``.

Every file is written atomically (temp file + rename) so an interrupted run never
leaves a half-written repro.py or JSON behind.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reducer.errors import ExitCode, ReprobotError
from reducer.failure.signature import Signature
from reducer.run.processes import script_argument

if TYPE_CHECKING:
    from reducer.failure.original import Failure, FailureSpec

DEFAULT_ROOT = Path("repros")


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:40] or "script"


@dataclass(frozen=True)
class ReproDir:
    """Paths of one reduction's folder. The folder is the unit every later stage reads."""

    path: Path

    @classmethod
    def create(cls, script: Path, signature: Signature, root: Path = DEFAULT_ROOT) -> "ReproDir":
        d = cls(root / f"{slugify(script.stem)}-{signature.id}")
        d.path.mkdir(parents=True, exist_ok=True)
        return d

    @classmethod
    def open(cls, path: str | Path) -> "ReproDir":
        d = cls(Path(path))
        if not d.path.exists():
            raise ReprobotError(f"{path}: no such folder", ExitCode.FILE_MISSING)
        if not d.signature_json.is_file():
            raise ReprobotError(f"{path}: not a repro folder (no signature.json); run `reprobot reduce` first",
                                ExitCode.BAD_INPUT)
        return d

    # The files, as docs/DESIGN.md lists them.
    original = property(lambda self: self.path / "original.py")
    repro = property(lambda self: self.path / "repro.py")
    signature_json = property(lambda self: self.path / "signature.json")
    traceback_txt = property(lambda self: self.path / "traceback.txt")
    reduction_json = property(lambda self: self.path / "reduction.json")
    env_json = property(lambda self: self.path / "env.json")
    requirements_in = property(lambda self: self.path / "requirements.in")
    requirements_lock = property(lambda self: self.path / "requirements.lock")
    route_json = property(lambda self: self.path / "route.json")
    related_json = property(lambda self: self.path / "related.json")
    filed_json = property(lambda self: self.path / "filed.json")

    def draft_md(self, repo_key: str) -> Path:
        return self.path / f"draft-{repo_key}.md"

    def draft_json(self, repo_key: str) -> Path:
        return self.path / f"draft-{repo_key}.json"

    def read_json(self, path: Path) -> Any:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ReprobotError(f"{path}: missing", ExitCode.BAD_INPUT) from None
        except json.JSONDecodeError as e:
            raise ReprobotError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})", ExitCode.BAD_INPUT) from None

    def signature(self) -> Signature:
        return Signature.from_dict(self.read_json(self.signature_json)["signature"])


def shown_path(path: Path) -> str:
    """A path as reprobot prints it: relative to the current directory when under it, else with
    the home folder as ``~`` (a user name in a path is nobody's business, even on screen)."""
    p = Path(path).absolute()
    try:
        return p.relative_to(Path.cwd()).as_posix() or "."
    except ValueError:
        pass
    try:
        return "~/" + p.relative_to(Path.home()).as_posix()
    except (ValueError, RuntimeError):
        from bot.scrub import scrub
        return scrub(p.as_posix()).text      # another user's home, a mounted drive: the scrubber's form


def record_failure(failure: "Failure", root: Path = DEFAULT_ROOT) -> ReproDir:
    """Write what `reduce` learned before reducing: original.py, signature.json, traceback.txt."""
    d = ReproDir.create(failure.spec.script, failure.signature, root)
    # Verbatim: these files stay on the user's disk and must run and resume exactly; whatever
    # leaves the machine (drafts, previews, replies) is scrubbed on its way out.
    write_text_atomic(d.original, failure.spec.source)
    if failure.seed is not None:
        # what is reduced: the script with the seed that makes it fail every time (original.py
        # stays the user's script)
        write_text_atomic(d.path / "seeded.py", failure.source)
    record = failure.record
    launch = failure.spec.launch
    write_json_atomic(d.signature_json, {
        "signature": failure.signature.to_dict(),
        "options": failure.spec.options.to_dict(),
        "record": record.to_dict(),
        "script": launch.relpath if launch is not None else failure.spec.script.name,
        "args": list(launch.args) if launch is not None else list(failure.spec.args),
        "command": (launch.display() if launch is not None else
                    " ".join(["python", script_argument(failure.spec.script.name), *failure.spec.args])),
        # the launch line every run used (torchrun, accelerate launch, python -m), as typed
        **({"launch": launch.to_dict()} if launch is not None else {}),
        # what every run set (the hang watch): with script, args and launch, the folder's run
        # recipe (bot/run_recipe.py) every later step runs the repro by
        "run_env": dict(failure.spec.env),
        "runs": [{"wall_time": round(o.wall_time, 3), "returncode": o.returncode,
                  "timed_out": o.timed_out, "peak_rss": o.peak_rss} for o in failure.outcomes],
        "choices": [s.to_dict() for s, _ in failure.choices],
        "as_itself": failure.as_itself,
        # the GPU set it was confirmed on, how many the original used, and whether one is enough
        "gpus": failure.gpu.to_dict(),
        "needs_gpus": failure.gpu.needs_gpus,
        # how often the original failed this way (reducer/failure/flaky.py), and the seed that fixed it
        "rate": failure.rate.to_dict() if failure.rate else None,
        "seed": failure.seed,
    })
    write_text_atomic(d.traceback_txt, record.text + "\n")
    return d


# ---- lookups: which folder, and what its files say ------------------------------------------
def latest_repro(root: Path = DEFAULT_ROOT) -> Path:
    """The repro folder under ``root`` whose failure was recorded last."""
    folders = [p.parent for p in root.glob("*/signature.json")] if root.is_dir() else []
    if not folders:
        raise ReprobotError(f"no repro folder under {root}/; pass one, or run `reprobot reduce` first",
                            ExitCode.FILE_MISSING)
    return max(folders, key=lambda p: (p / "signature.json").stat().st_mtime)


def find_stored(root: Path, spec: "FailureSpec") -> "tuple[Failure, ReproDir] | None":
    """The repro folder an earlier `reduce` of this script (same arguments, same launch line)
    left under ``root``, as (Failure, ReproDir), without running anything; None when there is
    none to continue (`reduce --resume`)."""
    from reducer.failure.original import stored_failure
    from reducer.failure.outcome import TracebackRecord
    if not root.is_dir():
        return None
    prefix = slugify(spec.script.stem) + "-"
    candidates = []
    for sig_file in root.glob(f"{prefix}*/signature.json"):
        folder = ReproDir(sig_file.parent)
        try:
            data = folder.read_json(sig_file)
        except ReprobotError:
            continue
        script_name = spec.launch.relpath if spec.launch is not None else spec.script.name
        if data.get("script") != script_name or list(data.get("args") or []) != list(spec.args):
            continue
        if (data.get("launch") or {}).get("tokens") != (spec.launch.tokens if spec.launch is not None else None):
            continue
        # A session stopped between confirming the failure and its first progress record has
        # no reduction.json yet: its confirmed failure still holds.
        newest = folder.reduction_json if folder.reduction_json.is_file() else sig_file
        candidates.append((newest.stat().st_mtime, folder, data))
    if not candidates:
        return None
    _, folder, data = max(candidates, key=lambda c: c[0])
    try:
        signature = Signature.from_dict(data["signature"])
        record = TracebackRecord.from_dict(data["record"])
    except (KeyError, TypeError, ValueError):
        return None
    return stored_failure(spec, signature, record, list(data.get("runs") or []),
                          bool(data.get("as_itself")), data.get("gpus"),
                          rate=data.get("rate"), seed=data.get("seed")), folder


# The verdict kinds versions.json and contrast.json record that a draft reads back; the values
# of bot/rerun/verdict.py's Kind, which takes them from here (the store sits below rerun/).
VERDICT_PASS = "PASS"
VERDICT_SAME = "same failure"


@dataclass
class PassingRun:
    """A `versions` run that passed: the releases it swapped in, and what its environment installed
    besides to meet their requirements (absent from versions.json written before it was recorded)."""
    changed: dict[str, str]
    also: dict[str, str] = field(default_factory=dict)


@dataclass
class RerunNotes:
    """What versions.json and contrast.json add to a draft."""
    fails_on: list[str] = field(default_factory=list)     # "Still fails on transformers 5.23.0 (latest)"
    passes_on: list[str] = field(default_factory=list)    # "Passes on accelerate 1.14.0 (latest)"
    # where the repro passed but the user's script, run there too, failed another way (often the
    # script's own drift: an import the later release needs): not shown as a fix, and read by the
    # classifier only against a verdict no run confirmed
    unconfirmed: list[str] = field(default_factory=list)
    unconfirmed_passing: list[PassingRun] = field(default_factory=list)
    bisect: str | None = None
    works_with: list[str] = field(default_factory=list)   # contrast changes that make it pass
    passed: list[tuple[str, str]] = field(default_factory=list)   # (package, release) runs that passed
    passing: list[PassingRun] = field(default_factory=list)       # the same runs, with all they changed
    # contrast's traced run: the values a function of the repro returned to the library frame that
    # then failed reading them (reducer/analysis/handback.py's records, library paths relative)
    handed_back: list[dict] = field(default_factory=list)

    @property
    def likely_fixed(self) -> bool:
        return bool(self.passes_on)

    @property
    def empty(self) -> bool:
        return not (self.fails_on or self.passes_on or self.unconfirmed or self.bisect or self.works_with)

    def headline(self) -> str | None:
        if self.likely_fixed:
            return ("Passes on " + "; ".join(self.passes_on) +
                    " — likely fixed upstream: is filing still useful?")
        return None


def releases_words(releases: dict[str, str]) -> str:
    """``accelerate 0.34.2, safetensors 0.4.3``: packages at their releases, by name."""
    return ", ".join(f"{n} {v}" for n, v in sorted(releases.items()))


def _versions_of(row: dict) -> str:
    changed = row.get("changed") or {}
    shown = row.get("versions") or {}
    names = list(changed) or list(shown)
    where = " / ".join(f"{n} {shown.get(n, changed.get(n))}" for n in names)
    # a companion the row moved to the release's time is part of what passed or failed there
    moved = row.get("moved") or {}
    return where + (" with " + releases_words(moved) if moved else "")


def _strs(d: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in d.items()} if isinstance(d, dict) else {}


def rerun_notes(repro: ReproDir) -> RerunNotes:
    """What the folder's versions.json and contrast.json say (empty notes when neither exists)."""
    notes = RerunNotes()
    path = repro.path / "versions.json"
    if path.is_file():
        data = repro.read_json(path)
        for row in data.get("rows", []):
            kind = row["verdict"]["kind"]
            if row["label"] == "locked":
                continue
            latest = "latest" in row["label"]
            where = _versions_of(row) + (" (latest)" if latest else "")
            # the user's script, where it ran beside a passing repro, says whether the release fixed
            # what the user hit (bot/rerun/versions.py): a failure there is no fix
            original = row.get("original")
            by_user = original.get("kind") if isinstance(original, dict) else None
            if kind == VERDICT_PASS and by_user not in (None, VERDICT_PASS):
                if by_user == VERDICT_SAME:
                    if latest:
                        notes.fails_on.append(f"{where} (the user's script; the reduced repro passes there)")
                else:
                    notes.unconfirmed.append(where)
                    notes.unconfirmed_passing.append(PassingRun(_strs(row.get("changed")), _strs(row.get("also"))))
            elif kind == VERDICT_PASS:
                notes.passes_on.append(where)
                notes.passed += [(p, str(v)) for p, v in (row.get("changed") or {}).items()]
                notes.passing.append(PassingRun(_strs(row.get("changed")), _strs(row.get("also"))))
            elif kind == VERDICT_SAME and latest:
                notes.fails_on.append(where)
        bisect = data.get("bisect") or {}
        if bisect.get("first_changed"):
            notes.bisect = bisect["sentence"]
        passing = [t for t in bisect.get("tried") or []
                   if bisect.get("package") and (t.get("verdict") or {}).get("kind") == VERDICT_PASS]
        notes.passed += [(bisect["package"], str(t["version"])) for t in passing]
        # a control cleared the failure's own packages a pass moved (bot/rerun/versions.py): they
        # are not what passed, so they do not count as changed beside the release
        cleared = {str(v) for v in bisect.get("controls") or {}}
        own = {str(n) for n in bisect.get("own") or {}}
        notes.passing += [PassingRun({bisect["package"]: str(t["version"])},
                                     {n: v for n, v in _strs(t.get("also")).items()
                                      if str(t["version"]) not in cleared or n not in own})
                          for t in passing]
    path = repro.path / "contrast.json"
    if path.is_file():
        data = repro.read_json(path)
        for ch in data.get("changes", []):
            if ch["verdict"]["kind"] == VERDICT_PASS:
                notes.works_with.append(ch["change"])
        notes.handed_back = [h for h in data.get("handback") or [] if isinstance(h, dict)]
    return notes
