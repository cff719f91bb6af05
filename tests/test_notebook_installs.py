"""A reduced notebook's `!pip install` lines in the environment record (issue #43).

env.json records what the notebook installs beside what the run had; the screen and the draft
say which of the notebook's pins the run did not meet (the repro was verified on the run's
versions); requirements.in keeps what ran, the notebook's lines below it as comments; a URL, VCS
link or local path is never written as installable, and a private one is not named.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from bot.env.notebook_installs import installs_section, mismatches
from bot.env.system_info import system_info
from bot.issue.notebook_note import draft_sentence
from bot.store import ReproDir

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGING = version("packaging")
RAW = {"distributions": {"distributions": [
    {"name": "peft", "version": "0.21.2", "kind": "index"},
    {"name": "transformers", "version": "4.57.1", "kind": "index"},
    {"name": "acme-tools", "version": "1.2+corp", "kind": "index"},           # a private build
]}}
PRIVATE_URL = "https://wheels.acme-corp.internal/simple/acme_peft-0.1-py3-none-any.whl"


def test_each_requirement_against_the_run_and_no_private_source_named() -> None:
    section = installs_section(["peft==0.13.0", "transformers>=4.40", "accelerate", "acme-tools==1.2",
                                f"acme-peft @ {PRIVATE_URL}", "git+https://github.com/huggingface/peft.git",
                                "git+ssh://git@git.acme-corp.internal/ml/peft.git@secret-branch",
                                "./vendor/mypkg", "local_build-1.0-py3-none-any.whl"], RAW, ["peft", "transformers"])
    by = {e["requirement"]: e for e in section["requirements"]}
    assert by["peft==0.13.0"] == {"requirement": "peft==0.13.0", "installable": True, "run_version": "0.21.2",
                                  "satisfied": False}
    assert by["transformers>=4.40"]["satisfied"] is True
    assert by["accelerate"]["satisfied"] is False and by["accelerate"]["run_version"] is None
    # privacy.py hides the private build's name in env.json: this section names it as it does
    assert "private package (not on PyPI) #1" in by and "acme-tools==1.2" not in by
    # a public upstream checkout is kept as written; the rest is named without where it lives
    assert by["git+https://github.com/huggingface/peft.git"]["source"] == "vcs"
    assert by["acme-peft @ <private URL>"]["source"] == "url"
    assert [e["source"] for e in section["requirements"][-3:]] == ["vcs", "path", "path"]
    text = json.dumps(section)
    for leak in ("acme-corp", "secret-branch", "vendor/mypkg", "local_build", "wheels."):
        assert leak not in text, leak
    assert not any(e["installable"] for e in section["requirements"] if "source" in e)
    assert section["unsatisfied"] == ["peft==0.13.0", "accelerate"]
    assert mismatches({"notebook_installs": section}) == ["peft==0.13.0 (the run had 0.21.2)",
                                                          "accelerate (not installed in the run)"]


def test_system_info_and_the_draft_sentence_say_which_versions_the_repro_ran_on(tmp_path: Path) -> None:
    env = {"notebook_installs": installs_section(["peft==0.13.0", "transformers>=4.40"], RAW, ["peft"])}
    text = system_info(env, "peft")
    assert "The notebook installs (recorded from its `!pip`/`%pip` lines, not run): peft==0.13.0 transformers>=4.40" in text
    assert "Verified on the run's versions, not the notebook's: peft==0.13.0 (the run had 0.21.2)" in text
    assert "notebook installs" not in system_info({}, "peft")      # a script's System Info is unchanged
    (tmp_path / "notebook.json").write_text(json.dumps({"notebook": "lora.ipynb", "code_cells": 4,
                                                        "requirements": ["peft==0.13.0"]}))
    (tmp_path / "env.json").write_text(json.dumps(env))
    sentence = draft_sentence(ReproDir(tmp_path))
    assert sentence.endswith("It was verified on the run's versions (System Info), not the notebook's: the "
                             "notebook installs `peft==0.13.0` (the run had 0.21.2).")


NOTEBOOK = {"cells": [
    {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
     "source": ["!pip install packaging==20.9 'peft @ " + PRIVATE_URL + "'\n", "%pip install packaging\n",
                "import packaging.version\n"]},
    {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [],
     "source": ["v = packaging.version.Version('1.0')\n", "print(v.public)\n", "v.major_minor\n"]},
], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.slow
def test_reduce_records_the_notebooks_installs_and_says_the_run_had_others(tmp_path: Path) -> None:
    (tmp_path / "pins.ipynb").write_text(json.dumps(NOTEBOOK))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "REPROBOT_OFFLINE": "1", "COLUMNS": "250"}
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "pins.ipynb", "--out", "repros", "--runs", "1",
                           "--max-time", "60"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback (most recent call last)" not in proc.stderr
    said = " ".join(proc.stdout.split())
    assert (f"the notebook installs what this run did not have: packaging==20.9 (the run had {PACKAGING}) — the "
            "repro was verified on the run's versions, not the notebook's") in said
    folder = next((tmp_path / "repros").glob("*/env.json")).parent
    record = json.loads((folder / "env.json").read_text())["notebook_installs"]["requirements"]
    assert [(e["requirement"], e["satisfied"]) for e in record] == [
        ("packaging==20.9", False), ("peft @ <private URL>", None), ("packaging", True)]

    # requirements.in: what ran, installable; the notebook's lines only as comments
    lines = (folder / "requirements.in").read_text().splitlines()
    assert f"packaging=={PACKAGING}" in lines
    assert f"#   packaging==20.9  (the run had {PACKAGING})" in lines
    assert "#   peft @ <private URL>  (not installable from here: url)" in lines
    assert not [ln for ln in lines if "20.9" in ln and not ln.startswith("#")]
    # nothing in the folder names the private index (notebook.json stores the install as env.json does)
    assert not [p.name for p in folder.iterdir() if p.is_file() and "acme-corp" in p.read_text(errors="replace")]

    proc = subprocess.run([sys.executable, "-m", "bot", "draft", str(folder), "--repo", "transformers"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    draft = (folder / "draft-transformers.md").read_text()
    assert "The notebook installs (recorded from its `!pip`/`%pip` lines, not run): packaging==20.9" in draft
    assert f"not the notebook's: the notebook installs `packaging==20.9` (the run had {PACKAGING})" in draft
    assert "acme-corp" not in draft
