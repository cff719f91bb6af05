"""bench/realbugs/: the entries' contract, the parts, and the harness's own pieces.

Fast and offline: no environment is built and nothing is downloaded. The entries themselves are
checked by running them (`python bench/realbugs/check.py`), which needs their releases; here only
what can be known without them: fields and types, the parts and their hash rule, scripts that
parse and have a real script's length, and for fixed bugs the release found by running; the
parts held out as a whole (catalog.CHOSEN: fresh, fresh2, fresh3, fresh4, fresh5, fresh6, fresh7, fresh8, fresh9) hold no issue that
reprobot's labelled or bundled issue sets contain. The harness pieces run for real on this interpreter (a real Runner subprocess, real wheel files).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import sys
import zipfile
from pathlib import Path

import libcst
import pytest

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "bench" / "realbugs"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import catalog  # noqa: E402
import check  # noqa: E402
import envs  # noqa: E402
import run  # noqa: E402

NAMES = catalog.entry_names()
VERDICTS = {"bug", "usage", "environment"}
REPOS = {"transformers": "huggingface/transformers", "trl": "huggingface/trl", "peft": "huggingface/peft",
         "accelerate": "huggingface/accelerate", "bitsandbytes": "bitsandbytes-foundation/bitsandbytes",
         "pytorch": "pytorch/pytorch"}
OPTIONAL_STR = (str, type(None))
OPTIONAL_INT = (int, type(None))


def _entry(name: str) -> dict:
    return catalog.load(name)


def test_there_are_entries():
    assert len(NAMES) >= 10, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_entry_fields_and_types(name):
    e = _entry(name)
    short, _, number = name.rpartition("-")
    assert e["repo"] == REPOS[short], "the folder's name says the repository"
    assert isinstance(e["number"], int) and str(e["number"]) == number
    assert e["url"] == f"https://github.com/{e['repo']}/issues/{e['number']}"
    assert isinstance(e["title"], str) and e["title"].strip()
    for key in ("reported_on", "extra_pins"):
        assert isinstance(e[key], dict)
        assert all(isinstance(k, str) and isinstance(v, str) and v[:1].isdigit() for k, v in e[key].items()), key
    assert e["reported_on"], "the releases it was reported on"
    sig = e["signature"]
    assert isinstance(sig["exception"], str) and sig["exception"]
    assert isinstance(sig["message"], OPTIONAL_STR)
    assert isinstance(sig["frames"], list) and all(isinstance(f, str) and ":" in f for f in sig["frames"])
    assert e["verdict"] in VERDICTS
    vf = e["verdict_from"]
    assert vf["url"].startswith("https://github.com/") and isinstance(vf["who"], str) and vf["who"]
    assert 0 < len(vf["gist"].split()) <= 20, "the verdict's gist is at most 20 words"
    for key in ("fixed_in", "fix_pr", "fixed_by", "first_passing_release", "posted_repro_from"):
        assert isinstance(e[key], OPTIONAL_STR), key
    assert isinstance(e["duplicates"], list) and all(isinstance(d, int) for d in e["duplicates"])
    assert isinstance(e["posted_repro_statements"], OPTIONAL_INT)
    assert (e["posted_repro_statements"] is None) == (e["posted_repro_from"] is None)
    assert isinstance(e["notes"], str)
    assert "draft" != e["notes"].strip(), "an entry still being written"


@pytest.mark.parametrize("name", NAMES)
def test_fixed_bugs_say_where_and_when(name):
    e = _entry(name)
    if e["fixed_in"] is None:
        assert e["first_passing_release"] is None or e["verdict"] == "bug"
        return
    assert e["verdict"] == "bug", "only a bug has a fixing release"
    assert e["first_passing_release"], "found by running the releases after the reported one"
    assert e["fixed_by"] in REPOS.values()
    if e["fix_pr"] is None:
        assert "fix_pr" in e["notes"], "a fix without a known PR says so in the notes"
    if e["first_passing_release"] != e["fixed_in"]:
        assert "first_passing_release" in e["notes"] or "first passing" in e["notes"], \
            "a first passing release other than the fix PR's must be explained in the notes"


@pytest.mark.parametrize("name", NAMES)
def test_usage_and_environment_entries_name_no_fix(name):
    e = _entry(name)
    if e["verdict"] != "bug":
        assert e["fixed_in"] is None and e["fix_pr"] is None and e["first_passing_release"] is None


@pytest.mark.parametrize("name", NAMES)
def test_script_parses_and_has_a_real_scripts_length(name):
    text = catalog.script_of(name).read_text(encoding="utf-8")
    ast.parse(text)
    libcst.parse_module(text)          # the reducer's parser too
    lines = len(text.splitlines())
    assert 60 <= lines <= 200, f"{lines} lines: a user's script, not a minimal repro"


def _part_files(folder: Path) -> dict[str, Path]:
    """Every part the catalog knows, its list kept in `folder`."""
    return {part: folder / f"{part}.json" for part in catalog.PART_FILES}


def test_parts_held_out_as_a_whole_are_data():
    """The parts chosen by issue are one tuple; the part files, and so check.py's and run.py's --part
    and check.py's --held-part, are built from it."""
    assert catalog.CHOSEN[:3] == ("fresh", "fresh2", "fresh3")
    assert list(catalog.PART_FILES) == [*catalog.HASHED, *catalog.CHOSEN]
    assert all(path == HERE / f"{part}.json" for part, path in catalog.PART_FILES.items())
    assert not hasattr(catalog, "FRESH") and not hasattr(catalog, "FRESH2")


def test_parts_are_disjoint_complete_and_follow_the_hash_rule():
    held, train = catalog.listed("heldout"), catalog.listed("train")
    chosen = {part: catalog.listed(part) for part in catalog.CHOSEN}
    parts = [held, train, *chosen.values()]
    assert all(len(p) == len(set(p)) for p in parts)
    assert sum(len(p) for p in parts) == len(set().union(*map(set, parts))), "no entry is in two parts"
    assert set().union(*map(set, parts)) == set(NAMES), "every entry is in exactly one part, and only entries"
    # the fresh parts are chosen, not hashed: their names may fall on either side of the rule
    for part, names in chosen.items():
        assert all(catalog.part_of(n) == part for n in names), part
    for name in held:
        assert int(hashlib.sha256(name.encode()).hexdigest(), 16) % 3 == 0, name
    for name in train:
        assert int(hashlib.sha256(name.encode()).hexdigest(), 16) % 3 != 0, name


def test_part_rule_and_register(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "PART_FILES", _part_files(tmp_path))
    names = [f"transformers-{n}" for n in range(30)]
    for n in names:
        catalog.register(n)
        catalog.register(n)         # once only
    held, train = catalog.listed("heldout"), catalog.listed("train")
    assert sorted(held + train) == sorted(names)
    assert held and train
    assert all(catalog.part_of(n) == "heldout" for n in held)


def test_fresh_part_is_chosen_by_name_and_stays_apart(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "PART_FILES", _part_files(tmp_path))
    held = next(f"peft-{n}" for n in range(100) if catalog.hash_part(f"peft-{n}") == "heldout")
    train = next(f"peft-{n}" for n in range(100) if catalog.hash_part(f"peft-{n}") == "train")
    # registered into the fresh part whatever the hash says; registered again: still fresh, once
    for name in (held, train, held):
        assert catalog.register(name, "fresh") == "fresh"
    assert catalog.listed("fresh") == [held, train]
    assert catalog.listed("heldout") == [] and catalog.listed("train") == []
    assert catalog.part_of(held) == "fresh" and catalog.register(held) == "fresh"
    # the hash parts are never chosen, and a measured entry cannot become fresh afterwards
    with pytest.raises(ValueError, match="hash rule"):
        catalog.register("peft-999", "heldout")
    other = next(f"trl-{n}" for n in range(100) if catalog.hash_part(f"trl-{n}") == "train")
    assert catalog.register(other) == "train"
    with pytest.raises(ValueError, match="already in the train part"):
        catalog.register(other, "fresh")


def test_second_fresh_part_is_chosen_by_name_and_apart_from_the_first(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "PART_FILES", _part_files(tmp_path))
    held = next(f"trl-{n}" for n in range(100) if catalog.hash_part(f"trl-{n}") == "heldout")
    assert catalog.register(held, "fresh2") == "fresh2"
    assert catalog.register(held) == "fresh2" and catalog.listed("fresh2") == [held]
    assert catalog.listed("heldout") == [] and catalog.listed("fresh") == []
    # an entry of one fresh part cannot move to the other, in either direction
    with pytest.raises(ValueError, match="already in the fresh2 part"):
        catalog.register(held, "fresh")
    first = "peft-7"
    catalog.register(first, "fresh")
    with pytest.raises(ValueError, match="already in the fresh part"):
        catalog.register(first, "fresh2")
    assert catalog.part_of(first) == "fresh" and catalog.listed("fresh2") == [held]


def _indexed_issues() -> set[tuple[str, int]]:
    """(repo, number) of every issue in the classifier's labelled files and the bundled issue index,
    including the ones rows only name (duplicate_of, fixed_by: "owner/name#N")."""
    found: set[tuple[str, int]] = set()

    def walk(obj):
        if isinstance(obj, dict):
            if isinstance(obj.get("repo"), str) and isinstance(obj.get("number"), int):
                found.add((obj["repo"], obj["number"]))
            for value in obj.values():
                walk(value)
        elif isinstance(obj, list):
            for value in obj:
                walk(value)
        elif isinstance(obj, str):
            found.update((m.group(1), int(m.group(2))) for m in re.finditer(r"([\w.-]+/[\w.-]+)#(\d+)", obj))

    files = sorted((ROOT / "bot" / "data" / "kind").glob("*.jsonl")) + sorted((ROOT / "bot" / "data" / "upstream").glob("*.jsonl"))
    assert files, "the labelled and bundled issue files"
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                walk(json.loads(line))
    return found


@pytest.mark.parametrize("part", catalog.CHOSEN)
def test_fresh_entries_are_outside_the_sets_reprobot_reads(part):
    """The fresh parts measure reprobot on issues it has never seen: none may be a row (or a named
    duplicate) of bot/data/kind/ (the classifier's labels) or bot/data/upstream/ (the bundled index)."""
    fresh = catalog.listed(part)
    assert fresh, f"the {part} held-out part has entries"
    seen = _indexed_issues()
    inside = [n for n in fresh if (_entry(n)["repo"], _entry(n)["number"]) in seen]
    assert not inside, f"fresh entries that reprobot's data already holds: {inside}"


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    path = folder / f"{name}-{version}-py3-none-any.whl"
    meta = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n%s" % (
        name, version, "".join(f"Requires-Dist: {r}\n" for r in requires))
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}-{version}.dist-info/METADATA", meta)
    return path


def test_unmet_reads_wheel_metadata(tmp_path):
    base = envs.Installed("3.11", "3.11.7", {"numpy": {"version": "2.4.6", "requires": []}})
    _wheel(tmp_path, "fakelib", "1.0", ["numpy<2", "tokenizers>=0.19,<0.20", "pywin32; sys_platform == 'win32'"])
    _wheel(tmp_path, "tokenizers", "0.19.1", [])
    # a pinned wheel not cached yet: the set cannot be used offline
    assert envs.unmet({"fakelib": "1.0", "tokenizers": "0.20.0"}, base, tmp_path) is None
    missing = envs.unmet({"fakelib": "1.0"}, base, tmp_path)
    assert missing == ["fakelib needs numpy<2", "fakelib needs tokenizers<0.20,>=0.19"]
    assert envs.unmet({"fakelib": "1.0", "tokenizers": "0.19.1", "numpy": "1.26.4"}, base, tmp_path) is None
    _wheel(tmp_path, "numpy", "1.26.4", [])
    assert envs.unmet({"fakelib": "1.0", "tokenizers": "0.19.1", "numpy": "1.26.4"}, base, tmp_path) == []


def test_extra_pins_give_way_to_the_base_release_a_swap_brings_back():
    base = envs.Installed("3.11", "3.11.7", {
        "transformers": {"version": "5.23.0", "requires": ["huggingface-hub>=1.0", "pywin32; sys_platform == 'win32'"]},
        "peft": {"version": "0.21.2", "requires": ["transformers"]}})
    # the base's transformers stays: an old hub pin would break it
    assert envs.excluded_by_base("huggingface_hub", "0.36.2", base, set())
    assert not envs.excluded_by_base("huggingface-hub", "1.2.0", base, set())
    # transformers itself is pinned to an old release: its base requirement no longer counts
    assert not envs.excluded_by_base("huggingface-hub", "0.36.2", base, {"transformers"})
    assert not envs.excluded_by_base("pywin32", "1.0", base, set())


def test_offline_build_refuses_what_is_not_cached(tmp_path):
    base = envs.Installed("3.11", "3.11.7", {})
    with pytest.raises(envs.NotInstallable, match="--offline"):
        envs.close_pins({"fakelib": "1.0"}, {}, base, tmp_path, online=False)


def test_entry_pins_swap_keeps_the_rest_as_reported():
    entry = {"reported_on": {"transformers": "4.41.2", "trl": "0.9.3"}, "extra_pins": {"tokenizers": "0.19.1"}}
    assert envs.entry_pins(entry) == ({"transformers": "4.41.2", "trl": "0.9.3", "tokenizers": "0.19.1"}, {})
    hard, soft = envs.entry_pins(entry, ("trl", "0.9.4"))
    assert hard == {"transformers": "4.41.2", "trl": "0.9.4"} and soft == {"tokenizers": "0.19.1"}
    hard, _ = envs.entry_pins(entry, ("trl", "0.21.0"), {"transformers": "4.55.4"})
    assert hard == {"transformers": "4.55.4", "trl": "0.21.0"}
    assert envs.parse_release_list("trl=0.9.4, 0.9.6") == ("trl", ["0.9.4", "0.9.6"])
    with pytest.raises(ValueError):
        envs.parse_release_list("trl")


@pytest.fixture
def tiny_corpus(tmp_path, monkeypatch):
    """A corpus of one entry that needs no release: it fails on this interpreter as it is."""
    entries = tmp_path / "entries"
    folder = entries / "pytorch-1"
    folder.mkdir(parents=True)
    (folder / "script.py").write_text(
        "import json\n\ndef load(text):\n    return json.loads(text)\n\nload('{broken')\n", encoding="utf-8")
    entry = {"repo": "pytorch/pytorch", "number": 1, "reported_on": {}, "extra_pins": {}, "signature": {}}
    (folder / "entry.json").write_text(json.dumps(entry), encoding="utf-8")
    monkeypatch.setattr(catalog, "ENTRIES", entries)
    monkeypatch.setattr(catalog, "PART_FILES", _part_files(tmp_path))
    monkeypatch.setattr(envs, "BASE_PYTHON", sys.executable)
    monkeypatch.setenv("REALBUGS_WHEELS", str(tmp_path / "wheels"))
    return folder


def test_check_records_then_matches_a_real_run(tiny_corpus, capsys):
    assert check.main(["pytorch-1", "--offline", "--record"]) == 1   # no signature yet: not "same"
    assert "unrecorded" in capsys.readouterr().out
    entry = json.loads((tiny_corpus / "entry.json").read_text())
    assert entry["signature"]["exception"] == "json.decoder.JSONDecodeError"
    assert entry["signature"]["frames"][0].startswith("json/")
    assert catalog.listed(catalog.part_of("pytorch-1")) == ["pytorch-1"]
    capsys.readouterr()
    assert check.main(["pytorch-1", "--offline"]) == 0
    assert "same" in capsys.readouterr().out
    # a different failure is not the entry's
    entry["signature"]["message"] = "something else"
    (tiny_corpus / "entry.json").write_text(json.dumps(entry))
    assert check.main(["pytorch-1", "--offline", "--json"]) == 1
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["status"] == "differs" and row["observed"]["exception"] == "json.decoder.JSONDecodeError"


def test_check_says_passes_and_rejects_bad_input(tiny_corpus, capsys):
    (tiny_corpus / "script.py").write_text("print('fine')\n", encoding="utf-8")
    entry = json.loads((tiny_corpus / "entry.json").read_text())
    entry["signature"] = {"exception": "ValueError", "message": "x", "frames": []}
    (tiny_corpus / "entry.json").write_text(json.dumps(entry))
    assert check.main(["pytorch-1", "--offline"]) == 1
    assert "passes" in capsys.readouterr().out
    assert check.main(["no-such-entry"]) == 2
    assert "no such entry" in capsys.readouterr().err
    assert check.main(["pytorch-1", "--releases", "torch"]) == 2
    assert check.main(["pytorch-1", "--with", "torch=2.5.0"]) == 2       # --with only beside --releases


def test_check_records_a_new_entry_into_the_fresh_part(tiny_corpus, capsys):
    assert check.main(["pytorch-1", "--offline", "--fresh"]) == 2          # --fresh only beside --record
    assert "--fresh only beside --record" in capsys.readouterr().err
    assert check.main(["pytorch-1", "--offline", "--record", "--fresh"]) == 1
    assert catalog.listed("fresh") == ["pytorch-1"]
    assert catalog.listed("heldout") == [] and catalog.listed("train") == []
    assert catalog.part_of("pytorch-1") == "fresh"
    capsys.readouterr()
    assert check.main(["pytorch-1", "--offline", "--part", "fresh"]) == 0
    assert "same" in capsys.readouterr().out


def test_check_records_a_new_entry_into_the_second_fresh_part(tiny_corpus, capsys):
    assert check.main(["pytorch-1", "--offline", "--fresh2"]) == 2         # --fresh2 only beside --record
    assert "--fresh2 only beside --record" in capsys.readouterr().err
    with pytest.raises(SystemExit):                                         # one chosen part, not both
        check.main(["pytorch-1", "--offline", "--record", "--fresh", "--fresh2"])
    assert check.main(["pytorch-1", "--offline", "--record", "--fresh2"]) == 1
    assert catalog.listed("fresh2") == ["pytorch-1"] and catalog.listed("fresh") == []
    assert catalog.part_of("pytorch-1") == "fresh2"
    capsys.readouterr()
    assert check.main(["pytorch-1", "--offline", "--part", "fresh2"]) == 0
    assert "same" in capsys.readouterr().out


def test_check_records_a_new_entry_into_a_held_part_by_name(tiny_corpus, capsys):
    assert check.main(["pytorch-1", "--offline", "--held-part", "fresh3"]) == 2     # only beside --record
    assert "--held-part fresh3 only beside --record" in capsys.readouterr().err
    for bad in (["--held-part", "train"], ["--held-part", "fresh99"], ["--fresh", "--held-part", "fresh3"]):
        with pytest.raises(SystemExit):             # a hash part, an unknown one, or two at once
            check.main(["pytorch-1", "--offline", "--record", *bad])
    assert check.main(["pytorch-1", "--offline", "--record", "--held-part", "fresh3"]) == 1
    assert catalog.listed("fresh3") == ["pytorch-1"]
    assert all(catalog.listed(p) == [] for p in catalog.PART_FILES if p != "fresh3")
    assert catalog.part_of("pytorch-1") == "fresh3"
    capsys.readouterr()
    assert check.main(["pytorch-1", "--offline", "--part", "fresh3"]) == 0
    assert "same" in capsys.readouterr().out


def test_run_takes_every_held_part(tiny_corpus, tmp_path, monkeypatch, capsys):
    """run.py's --part accepts each part of the catalog; --report runs nothing, it only reports."""
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))   # run.py may put a private uv first
    catalog.register("pytorch-1", "fresh3")
    for part in catalog.PART_FILES:
        assert run.main(["--part", part, "--report", "--out", str(tmp_path / "out")]) == 0, part
    assert "figures — fresh3 (1 entries)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        run.main(["--part", "fresh99", "--report", "--out", str(tmp_path / "out")])


def test_report_gives_the_second_fresh_part_its_own_figures(tiny_corpus, tmp_path):
    catalog.register("pytorch-1", "fresh2")
    ctx = run.Ctx(tmp_path / "out", offline=True, max_time=1, stage_timeout=1)
    text, figs = run.report(ctx, ["pytorch-1"], footer="")
    assert list(figs) == ["fresh2"] and figs["fresh2"]["entries"] == 1
    assert "figures — fresh2 (1 entries)" in text


def test_report_gives_the_fresh_part_its_own_figures(tiny_corpus, tmp_path):
    catalog.register("pytorch-1", "fresh")
    ctx = run.Ctx(tmp_path / "out", offline=True, max_time=1, stage_timeout=1)
    text, figs = run.report(ctx, ["pytorch-1"], footer="")
    assert list(figs) == ["fresh"] and figs["fresh"]["entries"] == 1
    assert "figures — fresh (1 entries)" in text
