"""The rate travels with the recipe (issue #40): a run a later step makes of the repro on the
locked versions is a draw of the failure's rate. A failure `reduce` saw fail every time that
passes in `versions`' locked row, in `watch`'s run of the locked release, or in `file --submit`'s
re-check is measured there, marked flaky in signature.json and reduction.json, said on screen,
and stated by the draft.

The failure is a real one in a library: ``fakelib.step()`` (a wheel installed in a throwaway
interpreter) keeps a counter in a file beside the script and fails 2 runs in 3 (it passes when
the count is 2 mod 3). While ``reduce`` runs, ``FLAKY_ALWAYS=1`` makes it fail every time, so
the reduction honestly finds it deterministic; each test then sets the count, so the sequence of
passes is the test's, not luck's."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bot.cli import main
from tests.test_rerun import base_venv, build_wheel

STEP = '''\
import os


def step():
    path = os.environ["FLAKY_COUNTER"]
    n = int(open(path).read()) if os.path.exists(path) else 0
    with open(path + f".{os.getpid()}", "w") as fh:
        fh.write(str(n + 1))
    os.replace(path + f".{os.getpid()}", path)
    if os.environ.get("FLAKY_NEVER"):                       # a machine where it does not fail at all
        return
    if os.environ.get("FLAKY_ALWAYS") or n % 3 != 2:      # fails 2 runs in 3
        raise RuntimeError("bad luck")
'''
# the next release breaks the call another way: `watch` then bisects, starting at the locked release
BROKEN = "def step():\n    raise TypeError(\"step() needs a seed now\")\n"

SCRIPT = '''\
import fakelib

print("starting")
fakelib.step()
'''


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("rate")
    wheels = root / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "fakelib", "1.0", STEP)
    base = root / "base"
    python = base_venv(base, wheels, "fakelib==1.0")
    (root / "third.py").write_text(SCRIPT)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("FLAKY_COUNTER", str(root / "count"))
        mp.setenv("FLAKY_ALWAYS", "1")
        mp.setenv("REPROBOT_OFFLINE", "1")
        mp.delenv("GITHUB_TOKEN", raising=False)
        mp.setenv("REPROBOT_GITHUB_API", "http://127.0.0.1:9")
        mp.setenv("REPROBOT_INDEX_DB", str(root / "issues.db"))
        assert main(["reduce", "third.py", "--python", str(python), "--out", "store", "--cold", "--no-trace",
                     "--no-env", "--quiet"]) == 0
        (folder,) = (root / "store").iterdir()
        assert main(["env", str(folder), "--python", str(python), "--quiet"]) == 0
    return root, wheels, python, folder


@pytest.fixture
def repro(world, tmp_path, monkeypatch):
    """A copy of the reduced folder (each test changes its rate), the count beside the script."""
    root, wheels, python, folder = world
    copy = tmp_path / "store" / folder.name
    shutil.copytree(folder, copy)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLAKY_COUNTER", str(tmp_path / "count"))
    monkeypatch.delenv("FLAKY_ALWAYS", raising=False)
    monkeypatch.setenv("REPROBOT_ENV_CACHE", str(tmp_path / "envs"))
    monkeypatch.setenv("COLUMNS", "250")
    return copy


def count(at: int) -> None:
    Path(__import__("os").environ["FLAKY_COUNTER"]).write_text(str(at))


def sig(folder: Path) -> dict:
    return json.loads((folder / "signature.json").read_text())


def said(capsys) -> str:
    out = capsys.readouterr()
    return " ".join((out.out + out.err).split())


def test_the_reduction_took_it_to_fail_every_time(world):
    _, _, _, folder = world
    data = sig(folder)
    assert data["rate"] == {"failed": 2, "runs": 2} and "later_runs" not in data
    red = json.loads((folder / "reduction.json").read_text())
    assert red["status"] == "done" and red.get("repro_sha256") and "flaky" not in red
    assert "fakelib.step()" in (folder / "repro.py").read_text() and "print" not in (folder / "repro.py").read_text()
    assert "fakelib==1.0" in (folder / "requirements.lock").read_text()


def test_a_pass_in_versions_locked_row_makes_it_flaky_with_its_rate(world, repro, capsys):
    _, wheels, python, _ = world
    versions = ["versions", str(repro), "--python", str(python), "--no-index", "--find-links", str(wheels)]
    # a failing run on the locked versions: counted, nothing changes, nothing said
    count(0)
    assert main(versions) == 0
    assert "flaky" not in said(capsys)
    data = sig(repro)
    assert data["rate"] == {"failed": 2, "runs": 2}
    assert data["later_runs"] == {"failed": 1, "runs": 1, "steps": {"versions": {"failed": 1, "runs": 1}}}
    assert "flaky" not in json.loads((repro / "reduction.json").read_text())

    # the locked row passes (count 2): measured there to 10 runs, P F F P F F P F F P
    count(2)
    assert main(versions) == 0
    out = said(capsys)
    assert "flaky: repro.py passed in a run on the locked versions (versions); it fails in 6 of 10 runs there" in out
    data = sig(repro)
    assert data["rate"] == {"failed": 7, "runs": 11} and data["rate_confirmed"] == {"failed": 2, "runs": 2}
    assert data["later_runs"]["steps"]["versions"] == {"failed": 7, "runs": 11}
    flaky = json.loads((repro / "reduction.json").read_text())["flaky"]
    assert flaky["original"] == {"failed": 2, "runs": 2} and flaky["verified"] == {"failed": 1, "runs": 1}
    assert flaky["repro"] == {"failed": 8, "runs": 12}
    # the locked row does not read as fixed: the failure is there, at its rate
    (row,) = json.loads((repro / "versions.json").read_text())["rows"]
    assert row["label"] == "locked" and row["verdict"]["kind"] == "same failure"
    assert row["note"] == "flaky: fails in 6 of 10 runs here"

    from bot.issue.draft import build_draft
    body = " ".join(build_draft(repro, "transformers").body.split())
    assert ("It is flaky: the repro fails in 8 of 12 runs (the original in 2 of 2); it was taken to fail every time "
            "until a later run on the locked versions passed (`versions`)") in body
    assert "for i in $(seq 12); do python " in body

    # once flaky, a later pass is one more draw: pooled, nothing new to say
    count(2)
    assert main(versions) == 0
    assert "flaky: repro.py passed" not in said(capsys)
    assert sig(repro)["later_runs"]["steps"]["versions"] == {"failed": 7, "runs": 12}
    assert sig(repro)["rate"] == {"failed": 7, "runs": 12}
    assert json.loads((repro / "reduction.json").read_text())["flaky"]["repro"] == {"failed": 8, "runs": 13}


def test_a_pass_in_the_recheck_stops_the_filing_and_the_draft_states_the_rate(world, repro, capsys):
    _, _, python, _ = world
    count(2)
    code = main(["file", str(repro), "--submit", "--repo", "transformers", "--python", str(python), "--yes",
                 "--anyway", "--not-a-secret", "--no-search"])
    out = said(capsys)
    assert code == 7, out           # flaky: nothing was filed (no token was needed to stop here)
    assert "flaky: repro.py passed in a run on the locked versions (file --submit); it fails in 6 of 10 runs" in out
    assert "not filed: repro.py passed in the re-check though it was taken to fail every time" in out
    data = sig(repro)
    assert data["rate"] == {"failed": 6, "runs": 10}
    assert data["later_runs"]["steps"] == {"file --submit": {"failed": 6, "runs": 10}}
    assert not (repro / "filed.json").exists()
    # the preview now builds the draft again (signature.json changed) and states the rate
    assert main(["file", str(repro), "--dry-run", "--repo", "transformers", "--python", str(python),
                 "--no-search"]) == 0
    assert "It is flaky: the repro fails in 7 of 11 runs (the original in 2 of 2)" in said(capsys)


def test_a_pass_in_watchs_run_of_the_locked_release_makes_it_flaky(world, repro, tmp_path, capsys):
    _, wheels, python, _ = world
    newer = tmp_path / "wheels"
    shutil.copytree(wheels, newer)
    build_wheel(newer, "fakelib", "1.1", BROKEN)
    count(2)
    assert main(["watch", str(repro.parent), "--python", str(python), "--no-index", "--find-links", str(newer),
                 "--packages", "fakelib", "--dry-run"]) == 0
    out = said(capsys)
    # 1.1 fails differently (its run never reaches the counter), so watch bisects from the locked
    # 1.0: that run passes, and is measured
    assert "fails differently since fakelib 1.1" in out
    assert "flaky: repro.py passed in a run on the locked versions (watch); it fails in 6 of 10 runs there" in out
    assert sig(repro)["rate"] == {"failed": 6, "runs": 10}


def test_a_repro_that_passes_every_time_there_is_said_not_taken_for_a_rate(world, repro, capsys, monkeypatch):
    """Passing in every run of the locked row is no rate: the failure does not show in this
    environment at all. Four runs say so (the pass and three more), nothing is marked flaky."""
    _, wheels, python, _ = world
    monkeypatch.setenv("FLAKY_NEVER", "1")
    assert main(["versions", str(repro), "--python", str(python), "--no-index", "--find-links", str(wheels)]) == 0
    assert "repro.py passed in all 4 of its runs on the locked versions (versions)" in said(capsys)
    data = sig(repro)
    assert data["rate"] == {"failed": 2, "runs": 2} and "rate_confirmed" not in data
    assert data["later_runs"]["steps"] == {"versions": {"failed": 0, "runs": 4}}
    assert "flaky" not in json.loads((repro / "reduction.json").read_text())
    (row,) = json.loads((repro / "versions.json").read_text())["rows"]
    assert row["verdict"]["kind"] == "PASS" and row["note"] == "fails in 0 of 4 runs here"
    from bot.issue.draft import build_draft
    assert "flaky" not in build_draft(repro, "transformers").body
