"""Which package made the tensors the failing line reads: one run of the repro, built.json.

The traceback names the package that raised. When the tensor that broke its check was made by
another package and handed over (a prefix PEFT built for transformers' cache, the ids trl's
collator built for transformers' mask), the fix is usually the maker's: routing weighs it
(bot/upstream/route.py, ``Made`` evidence). The repro runs once more through its run recipe with
``REPROBOT_BUILT`` set (reducer/run/exception_hook/reprobot_built.py records, for each tensor a
torch function returns, the innermost frame outside torch that called it); the run counts only
when it fails with the signature's exception and message (the recorder's own frame sits in the
traceback of a failure raised by a torch function, so frames are not compared).

A tensor made inside a module's ``forward`` is an activation flowing through every package on
the path (a LoRA layer's output is made in PEFT's ``forward`` and read by transformers' attention):
it says nothing about who handed what over, so it is not kept.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from bot.rerun.repro_run import ReproRunner, StoredRepro
from bot.store import ReproDir, write_json_atomic
from bot.upstream.made import FILE, Built, Made
from reducer.failure.normalize import library_path, package_of
from reducer.failure.signature import distinct_failures

ENV = "REPROBOT_BUILT"
_ACTIVATIONS = frozenset({"forward", "_call_impl", "_wrapped_call_impl"})


def _key(path: str, func: str) -> str | None:
    rel = library_path(path)
    return f"{rel}:{func}" if rel else None


def built_from_rows(rows: list[dict[str, Any]]) -> Built:
    """The recorder's JSON lines (the first exception of the run) as a Built."""
    out = Built()
    for row in rows[:1]:
        for fr in row.get("frames") or []:
            key = _key(str(fr.get("file") or ""), str(fr.get("function") or ""))
            if key is None:
                continue        # the user's own frame: the traceback already says what it called
            made = []
            for v in fr.get("values") or []:
                where = v.get("made") if isinstance(v, dict) else None
                if not (isinstance(where, list) and len(where) == 3) or where[2] in _ACTIVATIONS:
                    continue
                at = _key(str(where[0]), str(where[2]))
                made.append(Made(str(v.get("name")), package_of(str(where[0])) if at else None,
                                 at or f"<script>:{where[2]}"))
            out.frames.append((key, made))
    return out


def run_built(folder: ReproDir, python: str, timeout: float | None = None) -> Built | None:
    """Run the repro once with the recorder on; None when it did not fail with its signature's
    exception and message (nothing recorded is then about this failure)."""
    repro = StoredRepro.load(folder)
    runner = ReproRunner(repro, python, timeout=timeout)
    try:
        with tempfile.TemporaryDirectory(prefix="reprobot-built-") as tmp:
            path = Path(tmp) / "built.jsonl"
            outcome = runner.outcome(env={ENV: str(path)})
            target = repro.target
            if not any(sig.exc_type == target.exc_type and sig.message == target.message
                       for sig, _ in distinct_failures(outcome, repro.options)):
                return None
            rows = []
            if path.is_file():
                for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(row, dict) and row.get("exception") == target.exc_type.rsplit(".", 1)[-1]:
                        rows.append(row)
            return built_from_rows(rows)
    finally:
        runner.close()


def write_built(folder: ReproDir, built: Built) -> None:
    write_json_atomic(folder.path / FILE, built.to_dict())
