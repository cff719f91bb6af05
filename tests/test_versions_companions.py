"""A `versions` row that fails otherwise because a companion the swapped release needs is still the
user's release (issue #42, transformers-28293: transformers needs a newer accelerate it lists only
as an extra) runs again with that companion at the swapped release's time (bot/rerun/companions.py).
Real pip, fake wheels with dated releases in a local --find-links folder, real runs."""
from __future__ import annotations

import json
import shutil

import pytest

from bot.cli import main
from bot.rerun import companions
from bot.rerun.release_times import SIDECAR
from bot.rerun.verdict import Kind, Verdict
from bot.store import ReproDir, rerun_notes
from tests.test_rerun import base_venv, build_wheel, make_repro

# rbapp (the swapped package) 1.0 has the bug; 2.0 fixes it but calls rbcomp.go, which rbcomp has
# from 2.0, and checks for it without declaring the requirement; 3.0 calls go2, which rbcomp 3.0
# renamed it to. rbcomp's newest (3.0) is not the one rbapp 2.0 ran with: its time's is 2.0.
APP = {
    "1.0": 'def run(x):\n    raise ValueError("rbapp cannot run it")\n',
    "2.0": ("import rbcomp\n\ndef run(x):\n    if not hasattr(rbcomp, 'go'):\n"
            "        raise ImportError('rbapp needs rbcomp>=2.0: pip install -U rbcomp')\n    return rbcomp.go(x)\n"),
    "3.0": ("import rbcomp\n\ndef run(x):\n    if not hasattr(rbcomp, 'go2'):\n"
            "        raise ImportError('rbapp needs rbcomp>=3.0: pip install -U rbcomp')\n    return rbcomp.go2(x)\n"),
}
COMP = {"1.0": "def start(x):\n    return x\n", "2.0": "def go(x):\n    return x\n", "3.0": "def go2(x):\n    return x\n"}
TIMES = {"rbcomp": {"1.0": "2020-01-01T00:00:00Z", "2.0": "2021-01-01T00:00:00Z", "3.0": "2024-01-01T00:00:00Z"},
         "rbapp": {"1.0": "2020-02-01T00:00:00Z", "2.0": "2021-02-01T00:00:00Z", "3.0": "2024-02-01T00:00:00Z"}}
REPRO = "import rbapp\n\nrbapp.run(3)\n"
LOCK = "rbapp==1.0\nrbcomp==1.0\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("companions")
    wheels = root / "wheels"
    wheels.mkdir()
    for version in ("1.0", "2.0", "3.0"):
        build_wheel(wheels, "rbapp", version, APP[version])
        build_wheel(wheels, "rbcomp", version, COMP[version])
    undated = root / "undated"
    shutil.copytree(wheels, undated)
    (wheels / SIDECAR).write_text(json.dumps({"releases": TIMES}))
    python = base_venv(root / "base", wheels, "rbapp==1.0", "rbcomp==1.0")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REPROBOT_ENV_CACHE", str(root / "envs"))
        yield root, wheels, undated, python


def _versions(folder, python, wheels, *args: str) -> dict:
    assert main(["versions", str(folder), "--python", str(python), *args, "--no-index", "--find-links", str(wheels),
                 "--json"]) == 0
    return json.loads((folder / "versions.json").read_text())


def test_a_row_failing_on_the_users_companion_runs_again_with_the_companion_of_its_time(world):
    root, wheels, undated, python = world
    folder = make_repro(root, python, REPRO, LOCK, "latest")
    rows = {r["label"]: r for r in _versions(folder, python, wheels, "--packages", "rbapp")["rows"]}
    latest = rows["rbapp latest"]
    assert latest["verdict"]["kind"] == "PASS", latest
    assert latest["also"] == {"rbcomp": "3.0"}
    assert "moved beside it: rbcomp 3.0 (contemporary; the lock's 1.0)" in latest["note"]
    assert "rbcomp>=" in latest["note"]                 # the failure that asked for it
    assert rows["locked"]["also"] == {} and rows["locked"]["verdict"]["kind"] == "same failure"
    # the draft names the companion beside the release it passed on
    assert rerun_notes(ReproDir(folder)).passes_on == ["rbapp 3.0 with rbcomp 3.0 (latest)"]

    # the bisect names the fix, with the companion of 2.0's time (2.0, not the newest 3.0)
    b = _versions(folder, python, wheels, "--bisect", "rbapp", "--range", "1.0..3.0")["bisect"]
    assert b["first_passing"] == "2.0", b["sentence"]
    assert {t["version"]: t.get("also") for t in b["tried"]}["2.0"] == {"rbcomp": "2.0"}


def test_without_dated_releases_nothing_moves_and_the_row_fails_otherwise(world):
    root, wheels, undated, python = world
    folder = make_repro(root, python, REPRO, LOCK, "undated")
    rows = {r["label"]: r for r in _versions(folder, python, undated, "--packages", "rbapp")["rows"]}
    latest = rows["rbapp latest"]
    assert latest["verdict"]["kind"] == "different failure"
    assert "rbcomp" not in latest["also"] and "moved beside it" not in latest["note"]


@pytest.mark.parametrize("detail,frames,blamed", [
    ("ImportError: Using the `Trainer` with `PyTorch` requires `accelerate>=<N>.<N>`: Please run "
     "`pip install transformers[torch]`", (), {"accelerate", "transformers"}),
    ("TypeError: Accelerator.__init__() got an unexpected keyword argument 'use_seedable_sampler'",
     ("transformers/trainer.py:create_accelerator_and_postprocess",), {"accelerate", "transformers"}),
    ("ImportError: cannot import name 'EncoderDecoderCache' from 'transformers.cache_utils'", ("peft/x.py:f",),
     {"peft", "transformers"}),
    ("RuntimeError: shapes do not match", ("torch/nn/functional.py:linear",), {"torch"}),
])
def test_what_an_other_failure_blames(detail, frames, blamed):
    verdict = Verdict(Kind.DIFFERENT, detail, "x", 1.0, detail.split(":")[0], frames)
    assert companions.blamed(verdict) == blamed
    held = {"accelerate": "0.25.0", "transformers": "4.36.2", "peft": "0.7.0", "torch": "2.1.0"}
    moved = companions.to_move(verdict, held, {"transformers": "4.45.0"})
    # never the swapped package, never the foundation
    assert "transformers" not in moved and "torch" not in moved
    assert set(moved) == blamed - {"transformers", "torch"}


# The failure is raised through rbown (the failure's own package): rbuse 1.0 hands rbown.check a
# bad value, 2.0 hands it a good one and needs rbdep>=2 (undeclared), and rbdep 2.0 requires
# rbown>=2.0. So 2.0's pass comes with rbown moved; a control (rbown 2.0 beside rbuse 1.0) fails
# the same way, so the pass is rbuse's. With rbfix, rbown 2.0 is itself the fix: the control passes
# and the pass is not counted as rbuse's.
def _own_world(root, own: str, own_fixed: bool):
    wheels = root / f"wheels-{own}"
    wheels.mkdir()
    use, dep = f"{own}use", f"{own}dep"
    bad = f'def check(x):\n    if x < 0:\n        raise ValueError("{own} refuses a negative value")\n    return x\n'
    build_wheel(wheels, own, "1.0", bad)
    build_wheel(wheels, own, "2.0", "def check(x):\n    return x\n" if own_fixed else bad)
    build_wheel(wheels, dep, "1.0", "def start():\n    return 0\n", (f"{own}>=1.0",))
    build_wheel(wheels, dep, "2.0", "def go():\n    return 0\n", (f"{own}>=2.0",))
    build_wheel(wheels, use, "1.0", f"import {own}\n\ndef run():\n    return {own}.check(-1)\n")
    build_wheel(wheels, use, "2.0", f"import {own}, {dep}\n\ndef run():\n    if not hasattr({dep}, 'go'):\n"
                                    f"        raise ImportError('needs {dep}>=2.0')\n    return {own}.check({dep}.go())\n")
    (wheels / SIDECAR).write_text(json.dumps({"releases": {
        own: {"1.0": "2020-01-01T00:00:00Z", "2.0": "2021-01-01T00:00:00Z"},
        dep: {"1.0": "2020-01-02T00:00:00Z", "2.0": "2021-01-02T00:00:00Z"},
        use: {"1.0": "2020-02-01T00:00:00Z", "2.0": "2021-02-01T00:00:00Z"}}}))
    python = base_venv(root / f"base-{own}", wheels, f"{use}==1.0", f"{dep}==1.0", f"{own}==1.0")
    folder = make_repro(root, python, f"import {use}\n\n{use}.run()\n", f"{use}==1.0\n{dep}==1.0\n{own}==1.0\n", own)
    return folder, python, wheels, use


@pytest.mark.parametrize("own,own_fixed", [("rbown", False), ("rbfix", True)])
def test_a_pass_with_the_failures_own_package_moved_counts_when_a_control_still_fails(world, own, own_fixed):
    root = world[0]
    folder, python, wheels, use = _own_world(root, own, own_fixed)
    b = _versions(folder, python, wheels, "--bisect", use, "--range", "1.0..2.0")["bisect"]
    assert b["own"] == {own: "1.0", use: "1.0"}
    assert {t["version"]: t.get("also") for t in b["tried"]}["2.0"] == {f"{own}dep": "2.0", own: "2.0"}
    if own_fixed:
        # rbfix 2.0 beside rbfixuse 1.0 passes: the pass may be rbfix's, so it is not named
        assert b["controls"] == {} and b["first_passing"] is None
        assert "not counted as the fix" in b["sentence"]
    else:
        assert b["controls"] == {"2.0": "1.0"} and b["first_passing"] == "2.0"
        assert f"{own} 2.0 beside {use} 1.0 still fails the same way" in b["sentence"]
        # the classifier's reading: nothing the failure touches changed beside the passing release
        passing = rerun_notes(ReproDir(folder)).passing
        assert [(p.changed, p.also) for p in passing] == [({use: "2.0"}, {f"{own}dep": "2.0"})]


# transformers' lazy import wraps the failure of a module it imports: the wrapper's first line names
# nothing; the cause chained under it names the package (transformers-28293's rows 4.43-4.44.2)
WRAPPED = """\
import importlib


class LazyModule:
    def load(self, name):
        try:
            return importlib.import_module(name)
        except Exception as e:
            raise RuntimeError(f"Failed to import {name} because of the following error (look up to see "
                               f"its traceback):\\n{e}") from e


LazyModule().load("rbwrap_trainer")
"""


def test_an_exception_chained_under_the_other_failure_names_the_companion(tmp_path):
    import subprocess
    import sys

    from reducer.failure.outcome import Outcome
    from reducer.failure.signature import MatchOptions, Signature
    from reducer.failure.tracebacks import parse_tracebacks
    from bot.rerun.verdict import classify

    script = tmp_path / "wrapped.py"
    script.write_text(WRAPPED)
    (tmp_path / "rbwrap_trainer.py").write_text("from rbcomp_missing import go\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    outcome = Outcome(run.returncode, 0.1, run.stdout, run.stderr, tracebacks=parse_tracebacks(run.stderr))
    verdict = classify(outcome, Signature("ValueError", "rbapp cannot run it"), MatchOptions())
    assert verdict.kind is Kind.DIFFERENT and verdict.exc_type == "RuntimeError"
    assert "rbcomp" not in verdict.detail                  # the wrapper's own line names nothing
    assert verdict.causes and "No module named 'rbcomp_missing'" in verdict.causes[0]
    assert "rbcomp-missing" in companions.blamed(verdict)
    assert Verdict.from_dict(verdict.to_dict()) == verdict
    # without the chain, nothing is blamed: the cause is what names it
    assert "rbcomp-missing" not in companions.blamed(Verdict(Kind.DIFFERENT, verdict.detail, "x", 1.0, "RuntimeError",
                                                             verdict.frames))
    held = {"rbcomp-missing": "1.0", "rbapp": "1.0"}
    assert companions.to_move(verdict, held, {"rbapp": "2.0"}) == ["rbcomp-missing"]
