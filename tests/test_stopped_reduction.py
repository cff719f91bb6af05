"""A reduction stopped by --max-time ends like a finished one (issue #40): its best result is
verified cold, its environment pinned, and the draft's traceback is the repro's own run — or,
when the grace was too short to verify it, the folder and the draft say so, the environment is
pinned all the same, and the traceback shown is named as the original's.

The script's failure is raised in a slow library call (a module on PYTHONPATH that sleeps a
second first), so every run takes at least that long: the search cannot finish within
``--max-time``, yet its first candidate (the bulk clean-up, one run) is accepted before it stops,
so repro.py is not the original."""
from __future__ import annotations

import json
import os
import re
import venv
from pathlib import Path

import pytest

from bot.cli import main

SLOWLIB = '''\
import json
import time


def parse(text):
    time.sleep(1.0)         # every run of the script takes a second at least
    return json.loads(text)
'''

SCRIPT = '''\
"""Read the settings and report them."""
import slowlib

print("parsing the settings")
settings = {"name": "demo", "size": 3}
label = settings["name"].upper()
print("label:", label)
config = slowlib.parse("{bad")
print("done", config)
'''


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """An interpreter with nothing installed: pinning its environment takes a second, not the
    minute that probing a whole ML stack does."""
    base = tmp_path_factory.mktemp("bare") / "venv"
    venv.EnvBuilder(with_pip=False).create(base)
    return str(base / "bin" / "python")


@pytest.fixture
def work(tmp_path, monkeypatch, bare_python):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "slowlib.py").write_text(SLOWLIB)
    (tmp_path / "settings.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(lib), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    monkeypatch.setenv("REPROBOT_OFFLINE", "1")
    monkeypatch.setenv("COLUMNS", "250")
    return bare_python


def reduce_stopped(python: str) -> Path:
    code = main(["reduce", "settings.py", "--python", python, "--out", "store", "--cold", "--no-trace", "--runs", "1",
                 "--max-time", "6"])
    assert code == 14                                   # stopped at the time limit
    (folder,) = Path("store").iterdir()
    return folder


def script_lines(traceback: str, name: str) -> list[tuple[int, str]]:
    """(line number, code) of each frame of ``name`` in a traceback's text."""
    return [(int(n), code.strip()) for n, code in
            re.findall(rf'File "{re.escape(name)}", line (\d+), in \S+\n\s+(.+)', traceback)]


def test_a_stopped_reduction_is_verified_pinned_and_drafted_from_its_own_run(work, capsys):
    folder = reduce_stopped(work)
    red = json.loads((folder / "reduction.json").read_text())
    assert red["status"] == "stopped: time limit"
    assert red["verified"] in ("alone, offline", "beside its files") and red.get("repro_sha256")
    assert (folder / "env.json").is_file() and "requirements.lock" in os.listdir(folder)
    repro = (folder / "repro.py").read_text()
    assert repro != (folder / "original.py").read_text() and "print(" not in repro   # a candidate was kept
    lines = repro.splitlines()
    text = (folder / "traceback.txt").read_text()          # the run that verified it (alone: as repro.py)
    own = script_lines(text, "settings.py") + script_lines(text, "repro.py")
    assert own and all(lines[n - 1].strip() == code for n, code in own)   # repro.py's lines, not original.py's
    from bot.issue.draft import build_draft
    body = build_draft(folder, "transformers").body
    shown = script_lines(body, "repro.py") + script_lines(body, "settings.py")
    assert shown and all(lines[n - 1].strip() == code for n, code in shown)
    assert "not this repro's" not in body and "(unverified)" not in body


def test_a_stop_whose_grace_runs_out_is_pinned_and_says_whose_traceback_it_shows(work, monkeypatch, capsys):
    # no time at all to verify: the cold check meets the deadline at once
    monkeypatch.setattr("reducer.engine.verify_grace", lambda failure: 0.0)
    folder = reduce_stopped(work)
    out = " ".join(capsys.readouterr().out.split())
    assert "not verified (`--resume` verifies it)" in out
    red = json.loads((folder / "reduction.json").read_text())
    assert red["status"] == "stopped: time limit" and red["verified"] is None and not red.get("repro_sha256")
    # the environment does not wait on the verdict
    assert (folder / "env.json").is_file() and (folder / "requirements.lock").is_file()
    assert "environment pinned" in out
    from bot.issue.draft import build_draft
    draft = build_draft(folder, "transformers")
    body = " ".join(draft.body.split())
    assert "It was not re-run on its own after the reduction stopped (unverified)." in body
    assert "The traceback below is the original script's (`original.py`), not this repro's." in body
    assert any("--resume" in n for n in draft.notes)
