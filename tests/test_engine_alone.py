"""The engine owns a whole reduction (issue #41): a short script that imports only `reducer`
finds a small stdlib script's failure, reduces it and verifies it — the warm start, the traced
runs, the search, the cold verdict and the self-contained step — with no module of `bot` loaded;
and no module under reducer/ imports bot."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What a user of the engine alone writes: no bot, no folder, no console.
ALONE = """
import json, sys
from pathlib import Path
from reducer.engine import DONE, Options, Quiet, reduce
from reducer.failure.original import FailureSpec, find_failure

script = Path(sys.argv[1])
failure = find_failure(FailureSpec(script=script, source=script.read_text(), python=sys.executable, timeout=60))

class Heard(Quiet):
    def __init__(self):
        self.notes, self.steps, self.kept = [], 0, None
    def note(self, note):
        self.notes.append(note.text)
    def accepted(self, best, figures):
        self.steps += 1
    def verified(self, result):
        self.kept = result.best

heard = Heard()
result = reduce(failure, Options(max_time=60), heard)
print(json.dumps({"stopped": result.stopped, "best": result.best, "statements": result.statements,
                  "record": result.record.exc_type if result.record else None,
                  "verified": result.verification.verified if result.verification else None,
                  "warm": result.warm.enabled, "notes": heard.notes, "steps": heard.steps,
                  "heard_verified": heard.kept == result.best,
                  "bot_loaded": sorted(m for m in sys.modules if m == "bot" or m.startswith("bot."))}))
"""


# A run id that is not a UUID, reached through a helper and a loop (a few runs: kept under 20 s on
# a loaded 2-core machine); its imports are worth importing ahead, so the runs are warm.
SCRIPT = """
    import json
    import uuid

    JOBS = [{"id": "0d3c2a6e-6f0b-4f86-8a57-2f1d3b7c9e10", "name": "nightly"}, {"id": "run-0042", "name": "adhoc"}]


    def key_of(record):
        text = record["id"].strip().lower()
        return uuid.UUID(text)


    print(json.dumps(JOBS))
    keys = [key_of(r) for r in JOBS]
    print(len(keys))
"""


def test_a_script_that_imports_only_reducer_reduces_and_verifies_a_stdlib_script(tmp_path):
    script = tmp_path / "jobs.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip())
    proc = subprocess.run([sys.executable, "-c", ALONE, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["bot_loaded"] == []
    assert got["stopped"] == "done" and got["record"] == "ValueError", got
    assert got["statements"] <= 3 and "uuid.UUID(" in got["best"] and "key_of" not in got["best"], got["best"]
    assert got["verified"] == "alone, offline" and got["heard_verified"] and got["steps"] >= 2
    assert got["warm"] and any(n.startswith("warm start:") for n in got["notes"]), got["notes"]
    # the result is what it says: run alone in an empty folder, it fails the same way
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "repro.py").write_text(got["best"])
    run = subprocess.run([sys.executable, "repro.py"], cwd=empty, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "ValueError: badly formed hexadecimal UUID string" in run.stderr


def bot_imports(source: str) -> list[str]:
    """Every import of bot (or a module under it) in ``source``: module level, in functions, and
    under TYPE_CHECKING."""
    found: list[str] = []
    if not re.search(r"\bbot\b", source):       # no such import can be in it: spare the parse
        return found
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        found += [n for n in names if n == "bot" or n.startswith("bot.")]
    return found


def test_the_check_sees_an_import_of_bot():
    assert bot_imports("def f():\n    from bot.store import ReproDir\n") == ["bot.store"]
    assert bot_imports("if TYPE_CHECKING:\n    import bot.targets as t\n") == ["bot.targets"]
    assert bot_imports("import botocore\nfrom reducer import engine\n") == []


def test_no_module_under_reducer_imports_bot():
    found = {str(p.relative_to(ROOT)): bot_imports(p.read_text(encoding="utf-8"))
             for p in sorted((ROOT / "reducer").rglob("*.py"))}
    assert {p: names for p, names in found.items() if names} == {}
    assert len(found) > 40          # the walk read the engine, not an empty folder
