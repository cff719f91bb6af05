"""What `versions` reads at a bisect's boundaries and on latest rows (issue #42, the real-bug
benchmark's fresh part): the user's script where the reduced repro fails otherwise, and a pass that
came with the failure's own package moved. Real pip, fake wheels in a local --find-links folder,
real runs of the scripts through the folder's run recipe."""
from __future__ import annotations

import json

import pytest

from bot.cli import main
from bot.rerun.versions import Row
from bot.store import ReproDir
from tests.test_rerun import base_venv, build_wheel, make_repro

# rbcb: train() raises before it calls the callback until 1.2, which calls it. The user's script
# passes a callback that returns a number; reduce emptied it to `pass` (the failure never reached
# it), so on 1.2 the repro fails another way (None + 1) while the user's script runs through.
RAISES = 'def train(callback):\n    raise ValueError("the trainer cannot evaluate yet")\n'
CALLS = "def train(callback):\n    return callback(3) + 1\n"
ORIGINAL = "import rbcb\n\n\ndef metrics(x):\n    return x * 2\n\n\nprint(rbcb.train(metrics))\n"
REDUCED = "import rbcb\n\n\ndef metrics(x):\n    pass\n\n\nrbcb.train(metrics)\n"

# rbhost (the raising package, transformers' role) 2.0 calls a plugin's log() with a second
# argument; rbplug (trl's role) 1.0 does not take it. rbplug 1.1 pins rbhost<2 instead of fixing
# it, so its row runs rbhost 1.9 and passes; 1.2 takes the argument: the fix.
HOST_19 = "def run(plugin):\n    return plugin.log({'loss': 1.0})\n"
HOST_20 = "def run(plugin):\n    return plugin.log({'loss': 1.0}, 0.5)\n"
PLUG_OLD = "class Plug:\n    def log(self, logs):\n        return logs\n"
PLUG_FIXED = "class Plug:\n    def log(self, logs, start_time=None):\n        return logs\n"

# rbout: 1.2 fixed train() for a caller that passes data, which the user's script does; the reduced
# repro dropped the data (the failure did not need it) and still fails the same way on 1.2 and 1.3;
# 1.4 redesigned train(), so both fail otherwise there. The repro outlived the fix.
OUT_OLD = 'def train(callback, data=None):\n    raise ValueError("the trainer cannot evaluate yet")\n'
OUT_FIXED = ('def train(callback, data=None):\n    if data is None:\n'
             '        raise ValueError("the trainer cannot evaluate yet")\n    return callback(data)\n')
OUT_NEW = 'def train(callback, *, data):\n    raise RuntimeError("train() was redesigned")\n'
# rbvalid: the same fix in 1.2, then 1.4 validates the call: the repro (no data) fails otherwise
# there while the user's script passes, so the boundary alone would name 1.4
VALID_NEW = ('def train(callback, data=None):\n    if data is None:\n'
             '        raise TypeError("train() needs data")\n    return callback(data)\n')
# rbonly: 1.1 "fixed" train() only for a caller without data: the reduced repro (no data) passes on
# it while the user's script (data) still fails the same way; rbdrift: 1.1 lets a caller without
# data through and rejects data another way, so the user's script fails otherwise there
ONLY_NEW = ('def train(callback, data=None):\n    if data is not None:\n'
            '        raise ValueError("the trainer cannot evaluate yet")\n')
DRIFT_NEW = ('def train(callback, data=None):\n    if data is not None:\n'
             '        raise RuntimeError("train() takes no data now")\n')
OUT_ORIGINAL = "import rbout\n\nprint(rbout.train(len, [1, 2]))\n"
OUT_REDUCED = "import rbout\n\nrbout.train(len)\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("boundaries")
    wheels = root / "wheels"
    wheels.mkdir()
    for version, body in (("1.0", RAISES), ("1.1", RAISES), ("1.2", CALLS), ("1.3", CALLS)):
        build_wheel(wheels, "rbcb", version, body)
    for version, body in (("1.0", OUT_OLD), ("1.1", OUT_OLD), ("1.2", OUT_FIXED), ("1.3", OUT_FIXED),
                          ("1.4", OUT_NEW)):
        build_wheel(wheels, "rbout", version, body)
        build_wheel(wheels, "rbvalid", version, VALID_NEW if version == "1.4" else body)
    for name, new in (("rbonly", ONLY_NEW), ("rbdrift", DRIFT_NEW)):
        build_wheel(wheels, name, "1.0", OUT_OLD)
        build_wheel(wheels, name, "1.1", new)
    build_wheel(wheels, "rbhost", "1.9", HOST_19)
    build_wheel(wheels, "rbhost", "2.0", HOST_20)
    for version, body, requires in (("1.0", PLUG_OLD, ("rbhost",)), ("1.1", PLUG_OLD, ("rbhost<2",)),
                                    ("1.2", PLUG_FIXED, ("rbhost>=1.9",)), ("1.3", PLUG_FIXED, ("rbhost>=1.9",))):
        build_wheel(wheels, "rbplug", version, body, requires)
    python = base_venv(root / "base", wheels, "rbcb==1.0", "rbhost==2.0", "rbplug==1.0", "rbout==1.0",
                       "rbvalid==1.0", "rbonly==1.0", "rbdrift==1.0")
    # one overlay cache for the module: the latest row reuses the environment the bisect built
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REPROBOT_ENV_CACHE", str(root / "envs"))
        yield root, wheels, python


def _versions(folder, python, wheels, *args: str) -> dict:
    assert main(["versions", str(folder), "--python", str(python), *args, "--no-index", "--find-links", str(wheels),
                 "--json"]) == 0
    return json.loads((folder / "versions.json").read_text())


def test_where_the_repro_fails_otherwise_the_users_script_names_the_fix(world, capsys):
    root, wheels, python = world
    folder = make_repro(root, python, REDUCED, "rbcb==1.0\n", "callback")
    (folder / "original.py").write_text(ORIGINAL)

    b = _versions(folder, python, wheels, "--bisect", "rbcb", "--range", "1.0..1.3")["bisect"]
    tried = {t["version"]: t for t in b["tried"]}
    assert (b["first_changed"], b["last_same"]) == ("1.2", "1.1")
    assert tried["1.2"]["verdict"]["kind"] == "different failure"
    assert "NoneType" in tried["1.2"]["verdict"]["detail"]
    # the user's script ran there (and only at the boundary) and passed: 1.2 is the fix
    assert tried["1.2"]["original"]["kind"] == "PASS"
    assert [v for v, t in tried.items() if "original" in t] == ["1.2"]
    assert b["first_passing"] == "1.2"
    assert b["sentence"].startswith("first passing: rbcb 1.2 (the repro fails otherwise there; "
                                    "the user's script passes; last failing 1.1)")

    # the latest row: the same reading, recorded as its own field, printed, and read back
    data = _versions(folder, python, wheels, "--packages", "rbcb")
    rows = {r["label"]: r for r in data["rows"]}
    assert rows["locked"]["verdict"]["kind"] == "same failure" and rows["locked"]["original"] is None
    latest = Row.from_dict(rows["rbcb latest"])
    assert latest.verdict.kind.value == "different failure" and latest.original.kind.value == "PASS"
    assert latest.judged.kind.value == "PASS"
    assert Row.from_dict(latest.to_dict()) == latest
    capsys.readouterr()
    assert main(["versions", str(folder), "--python", str(python), "--packages", "rbcb", "--no-index",
                 "--find-links", str(wheels)]) == 0
    assert "the repro fails otherwise there; the user's script passes" in capsys.readouterr().out

    # what the classifier reads: the user's script's pass counts as the run's pass
    from bot.upstream.kind import script_passes
    assert [(p.changed, p.also) for p in script_passes(ReproDir.open(folder))] == [({"rbcb": "1.3"}, {})]


@pytest.mark.parametrize("name, by_user, words", [
    ("rbonly", "same failure", "the repro passes there, but the user's script still fails the same way"),
    ("rbdrift", "different failure", "the repro passes there, but the user's script fails otherwise"),
])
def test_a_latest_release_the_repro_passes_on_is_no_fix_where_the_users_script_fails(world, capsys, name,
                                                                                      by_user, words):
    """The reduced repro passes on the latest release, the user's script does not: the row carries
    the user's script's verdict, and neither the draft's notes nor the classifier read it as a fix."""
    from bot.store import rerun_notes
    root, wheels, python = world
    folder = make_repro(root, python, OUT_REDUCED.replace("rbout", name), f"{name}==1.0\n", f"{name}-latest")
    (folder / "original.py").write_text(OUT_ORIGINAL.replace("rbout", name))
    rows = {r["label"]: r for r in _versions(folder, python, wheels, "--packages", name)["rows"]}
    latest = Row.from_dict(rows[f"{name} latest"])
    assert latest.verdict.kind.value == "PASS" and latest.original.kind.value == by_user
    # the user's problem is still there the recorded way: the row reads as still failing
    assert latest.judged.kind.value == ("same failure" if by_user == "same failure" else "PASS")
    capsys.readouterr()
    assert main(["versions", str(folder), "--python", str(python), "--packages", name, "--no-index",
                 "--find-links", str(wheels)]) == 0
    assert words in capsys.readouterr().out
    notes = rerun_notes(ReproDir.open(folder))
    assert notes.passes_on == [] and notes.passed == [] and notes.passing == []
    if by_user == "same failure":
        assert notes.fails_on == [f"{name} 1.1 (latest) (the user's script; the reduced repro passes there)"]
    else:
        assert notes.unconfirmed == [f"{name} 1.1 (latest)"] and not notes.likely_fixed


def test_a_latest_release_where_both_pass_is_a_fix(world):
    """The control: where the user's script passes too, the latest row is read as a fix."""
    from bot.store import rerun_notes
    root, wheels, python = world
    folder = make_repro(root, python, OUT_REDUCED.replace("rbout", "rbonly"), "rbonly==1.0\n", "both-pass")
    (folder / "original.py").write_text(OUT_REDUCED.replace("rbout", "rbonly"))
    rows = {r["label"]: r for r in _versions(folder, python, wheels, "--packages", "rbonly")["rows"]}
    assert rows["rbonly latest"]["original"]["kind"] == "PASS"
    notes = rerun_notes(ReproDir.open(folder))
    assert notes.passed == [("rbonly", "1.1")] and notes.likely_fixed


def test_where_the_repro_outlived_the_fix_the_users_script_is_bisected(world):
    """The repro fails the same way up to 1.3 and otherwise from 1.4, where the user's script fails
    otherwise too: the bisect alone names no fix. The user's script at 1.3, the last release where
    the repro fails the same way, passes; bisected below, it names 1.2."""
    root, wheels, python = world
    folder = make_repro(root, python, OUT_REDUCED, "rbout==1.0\n", "outlived")
    (folder / "original.py").write_text(OUT_ORIGINAL)
    b = _versions(folder, python, wheels, "--bisect", "rbout", "--range", "1.0..1.4")["bisect"]
    assert (b["first_changed"], b["last_same"]) == ("1.4", "1.3")
    tried = {t["version"]: t for t in b["tried"]}
    assert tried["1.4"]["original"]["kind"] == "different failure"
    assert {t["version"]: t["original"]["kind"] for t in b["script_tried"]} == \
        {"1.3": "PASS", "1.1": "same failure", "1.2": "PASS"}
    assert b["script_fix"] == "1.2" and b["first_passing"] == "1.2"
    assert b["sentence"].startswith("the user's script passes from rbout 1.2 (the repro still fails the same way "
                                    "there: reduce kept what the failure needs, not what the fix changed; last "
                                    "failing 1.1)")
    # what the classifier reads: those passes of the user's script are the runs' passes
    from bot.upstream.kind import script_passes
    assert {p.changed["rbout"] for p in script_passes(ReproDir.open(folder))} == {"1.2", "1.3"}


def test_a_pass_of_the_users_script_at_the_first_change_is_checked_below_it(world):
    """The repro fails the same way to 1.3 and otherwise at 1.4, where the user's script passes: the
    boundary would name 1.4, but the user's script passes at 1.3 already, and from 1.2."""
    root, wheels, python = world
    folder = make_repro(root, python, OUT_REDUCED.replace("rbout", "rbvalid"), "rbvalid==1.0\n", "valid")
    (folder / "original.py").write_text(OUT_ORIGINAL.replace("rbout", "rbvalid"))
    b = _versions(folder, python, wheels, "--bisect", "rbvalid", "--range", "1.0..1.4")["bisect"]
    assert (b["first_changed"], b["last_same"]) == ("1.4", "1.3")
    assert {t["version"]: t for t in b["tried"]}["1.4"]["original"]["kind"] == "PASS"
    assert b["script_fix"] == "1.2" and b["first_passing"] == "1.2"
    assert b["sentence"].startswith("the user's script passes from rbvalid 1.2 (")


def test_where_the_users_script_fails_too_nothing_more_is_named(world):
    """The same bisect with the user's script failing like the repro on every release: one run of it
    at 1.3 (the check), no fix named."""
    root, wheels, python = world
    folder = make_repro(root, python, OUT_REDUCED, "rbout==1.0\n", "not-outlived")
    (folder / "original.py").write_text(OUT_REDUCED + "# the user's script, as reduced\n")
    b = _versions(folder, python, wheels, "--bisect", "rbout", "--range", "1.0..1.4")["bisect"]
    assert [t["version"] for t in b["script_tried"]] == ["1.3"]
    assert b["script_fix"] is None and b["first_passing"] is None
    assert not b["sentence"].startswith("the user's script passes")


def test_a_pass_that_came_with_the_failures_own_package_moved_is_not_the_fix(world):
    root, wheels, python = world
    folder = make_repro(root, python, "import rbhost, rbplug\nrbhost.run(rbplug.Plug())\n",
                        "rbhost==2.0\nrbplug==1.0\n", "pinned")
    b = _versions(folder, python, wheels, "--bisect", "rbplug", "--range", "1.0..1.3")["bisect"]
    tried = {t["version"]: t for t in b["tried"]}
    # 1.1 passes only because its row installed rbhost 1.9, the package the failure is raised in
    assert tried["1.1"]["verdict"]["kind"] == "PASS" and tried["1.1"]["also"] == {"rbhost": "1.9"}
    assert tried["1.2"]["verdict"]["kind"] == "PASS" and tried["1.2"]["also"] == {}
    assert b["own"] == {"rbhost": "2.0"}
    assert (b["first_changed"], b["then_changed"], b["first_passing"]) == ("1.1", "1.2", "1.2")
    sentence = b["sentence"]
    assert sentence.startswith("first passing: rbplug 1.1 (with rbhost 1.9 installed beside it; last failing 1.0)")
    assert "not counted as the fix" in sentence
    assert "first passing with rbhost as the user has it: rbplug 1.2 (last 1.1)" in sentence


def test_the_classifier_reads_the_users_scripts_pass_as_the_runs_pass(tmp_path):
    """An environment verdict gives way to a fix `versions` found in the raising package
    (bot/upstream/kind.py): a boundary where the repro failed otherwise and the user's script
    passed is that fix, named as the user's script's pass."""
    from bot.upstream.failure import failure_from_text
    from bot.upstream.kind import BUG, ENVIRONMENT, classify_repro
    from tests.test_kind import SITE, _traceback
    text = _traceback("from peft import get_peft_model",
                      [("peft/__init__.py", "<module>", "from .mapping import get_peft_model"),
                       ("peft/utils/save_and_load.py", "<module>", "from transformers import shard_checkpoint")],
                      "ImportError: cannot import name 'shard_checkpoint' from 'transformers' "
                      f"({SITE}/transformers/__init__.py)")
    (tmp_path / "signature.json").write_text(json.dumps({"record": failure_from_text(text).record.to_dict()}))
    (tmp_path / "env.json").write_text(json.dumps({"packages": {
        "peft": {"installed": True, "version": "0.13.0"}, "transformers": {"installed": True, "version": "4.47.0"}}}))

    def bisect(original: str | None) -> tuple[str, str]:
        boundary = {"version": "0.13.2", "verdict": {"kind": "different failure", "detail": "RuntimeError: shapes"},
                    **({"original": {"kind": original}} if original else {})}
        (tmp_path / "versions.json").write_text(json.dumps({"rows": [], "bisect": {
            "package": "peft", "first_changed": "0.13.2", "sentence": "",
            "tried": [{"version": "0.13.0", "verdict": {"kind": "same failure"}}, boundary]}}))
        k = classify_repro(ReproDir.open(tmp_path))
        return k.kind, k.reason

    assert bisect(None)[0] == ENVIRONMENT
    assert bisect("same failure")[0] == ENVIRONMENT
    kind, reason = bisect("PASS")
    assert kind == BUG and "the user's script passes on peft 0.13.2" in reason


def test_a_bracket_with_nothing_installable_does_not_stop_the_other():
    # trl-2861's shape: fails on 0 (the reported release), passes from 1 (the fix), fails another
    # way at 4 and a third way at 9 (later releases), and 5-8 do not install. The probe at 4 splits
    # the range; the wider bracket (4..9) is probed next and has nothing installable: it is left,
    # and the first change is still narrowed to 1 (it used to stop there, naming 0..4 a range
    # that "did not install")
    from bot.rerun.verdict import Kind, Verdict
    from bot.rerun.versions import brackets
    table = ["same", "pass", "pass", "pass", "other", None, None, None, None, "third"]
    tried: list[int] = []

    def at(i: int) -> Verdict:
        tried.append(i)
        return Verdict(Kind.NOT_INSTALLABLE if table[i] is None else Kind.DIFFERENT, "")

    assert brackets(len(table) - 1, lambda i: table[i], at) == (0, 1, 4, 9)
    assert 1 in tried
