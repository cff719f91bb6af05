"""temp_folders: a temporary folder written as a relative folder; verdicts from real runs, each in a
fresh folder of its own (tests/reducer_support.py:SubprocessOracle)."""
from __future__ import annotations

from tests.reducer_support import RecordingOracle, SubprocessOracle, reduce_with

# `save` creates the folder it is given, as save_pretrained does
SAVES = '''\
import json
import os
import tempfile


def save(obj, folder):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "c.json"), "w") as f:
        json.dump(obj, f)


with tempfile.TemporaryDirectory() as tmp:
    save({"a": 1}, tmp)
    json.load(open(os.path.join(tmp, "c.json")))["b"]
'''


def test_a_folder_the_code_creates_itself_becomes_a_relative_literal() -> None:
    out = reduce_with(SAVES, SubprocessOracle.for_source(SAVES), "temp_folders")
    assert "TemporaryDirectory" not in out and "with tempfile" not in out
    assert out.endswith('save({"a": 1}, \'reprobot_tmp\')\n'
                        'json.load(open(os.path.join(\'reprobot_tmp\', "c.json")))["b"]\n')


def test_a_folder_written_into_is_made_first_with_mkdtemp() -> None:
    # open(..., "w") needs the folder to exist: the literal fails (FileNotFoundError), mkdtemp holds
    src = SAVES.replace("    os.makedirs(folder, exist_ok=True)\n", "")
    out = reduce_with(src, SubprocessOracle.for_source(src), "temp_folders")
    assert out.endswith('tmp = tempfile.mkdtemp()\nsave({"a": 1}, tmp)\n'
                        'json.load(open(os.path.join(tmp, "c.json")))["b"]\n')


def test_mkdtemp_bound_to_a_name_becomes_the_literal() -> None:
    src = SAVES.replace('with tempfile.TemporaryDirectory() as tmp:\n    save', 'tmp = tempfile.mkdtemp()\nsave') \
               .replace('    json.load(open(os.path.join(tmp', 'json.load(open(os.path.join(tmp')
    out = reduce_with(src, SubprocessOracle.for_source(src), "temp_folders")
    assert "tmp = 'reprobot_tmp'\n" in out and "mkdtemp" not in out


def test_other_withs_and_temporary_files_are_left_alone() -> None:
    two_items = SAVES.replace("with tempfile.TemporaryDirectory() as tmp:",
                              "with tempfile.TemporaryDirectory() as tmp, open(__file__) as me:")
    named_file = ("import tempfile\nwith tempfile.NamedTemporaryFile('w') as f:\n"
                  "    f.write('x')\n    {}[f.name]\n")
    rebinding = SAVES.replace('    save({"a": 1}, tmp)\n', '    tmp = tmp + "/sub"\n    save({"a": 1}, tmp)\n')
    for src in (two_items, named_file, rebinding):
        oracle = RecordingOracle(SubprocessOracle.for_source(src))
        assert reduce_with(src, oracle, "temp_folders") == src
        assert oracle.runs == []


def test_the_system_temporary_folder_becomes_the_run_s_own() -> None:
    # gettempdir() exists already; '.' is the candidate's own fresh folder, so the write lands there
    src = SAVES.replace("with tempfile.TemporaryDirectory() as tmp:\n    save", "save") \
               .replace('save({"a": 1}, tmp)', 'save({"a": 1}, tempfile.gettempdir())') \
               .replace("    json.load(open(os.path.join(tmp", "json.load(open(os.path.join(tempfile.gettempdir()")
    out = reduce_with(src, SubprocessOracle.for_source(src), "temp_folders")
    assert "gettempdir" not in out
    assert out.endswith("save({\"a\": 1}, '.')\njson.load(open(os.path.join('.', \"c.json\")))[\"b\"]\n"), out


def test_a_recipe_names_a_prefixed_temp_folder_by_its_prefix(tmp_path, monkeypatch) -> None:
    # the value recipes' folder names (reducer/analysis/recipes.py LOADER ``_fresh_name``): a
    # folder mkdtemp(prefix="intent-export-") made in the temp folder is the user's prefix,
    # not its random tail; a folder named so elsewhere keeps its name
    import os
    import re
    import tempfile

    from reducer.analysis.recipes import LOADER
    space = {"os": os, "re": re, "sys": __import__("sys")}
    exec(LOADER, space)
    fresh = space["_fresh_name"]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert fresh(os.path.join(str(tmp_path), "intent-export-_tz5injb")) == "reprobot_intent-export"
    assert fresh(os.path.join(str(tmp_path), "tmpk3j9x_ab")) == "reprobot_tmp"
    assert fresh(os.path.join(str(tmp_path), "ckpt")) == "reprobot_ckpt"
    assert fresh(os.path.join(str(tmp_path), "checkpoint")) == "reprobot_checkpoint"
    assert fresh("/data/runs/intent-export-_tz5injb") == "reprobot_intent-export-_tz5injb"
