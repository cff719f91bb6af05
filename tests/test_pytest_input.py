"""`reprobot reduce tests/test_x.py::test_name` (issue #43): pytest itself resolves the node id,
``-k`` and the parametrized id and runs the selection once; the failing test is written as a
plain script (its fixtures as plain code, its parameter set's values), checked to fail as the
test does, and reduced like any script. `-- pytest ...` lands in the same place; the draft names
the test; a fixture that cannot be written as plain code is refused with one line.

The tests are tiny standard-library test files in tmp_path, run by the real pytest in a
subprocess; each script is run alone, outside pytest, by a real interpreter."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bot.cli import main
from bot.pytest_input import load_test, requested_node
from reducer.errors import ExitCode, ReprobotError
from reducer.failure.pytest_node import build_script
from reducer.run.pytest_run import run_pytest

INI = "[pytest]\n"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    (folder / "pytest.ini").write_text(INI)          # the folder is the rootdir, as a user's project is
    return path


def chosen_test(folder: Path, target: str, keyword: str | None = None, pick: int = 1):
    request = requested_node(folder / target, keyword, [])
    assert request is not None
    return load_test(request, sys.executable, 120, pick, cwd=folder)


def run_alone(script: str, folder: Path) -> str:
    """The script run by a plain interpreter beside the test (never through pytest): the last
    line of its traceback."""
    path = folder / "as_script.py"
    path.write_text(script, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(path)], cwd=folder, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0, proc.stdout
    return proc.stderr.strip().splitlines()[-1]


# ---- which test: node id, -k, parametrized ids -------------------------------------------------------
MODULE = """
    import json

    def parse(text):
        return json.loads(text)

    def test_ok():
        assert parse("[1]") == [1]

    def test_bad_json():
        parse("{'a': 1}")

    def test_bad_number():
        int("seven")
"""


def test_a_node_id_names_the_test_and_its_script_fails_alone(tmp_path: Path) -> None:
    write(tmp_path, "test_parse.py", MODULE)
    test = chosen_test(tmp_path, "test_parse.py::test_bad_number")
    assert test.script.nodeid == "test_parse.py::test_bad_number" and test.selected == 1
    assert "int(\"seven\")" in test.script.script.split("# reprobot: the test")[1]     # the body, at the top level
    assert run_alone(test.script.script, tmp_path) == "ValueError: invalid literal for int() with base 10: 'seven'"


def test_k_selects_and_pick_takes_the_nth_failing_test(tmp_path: Path, capsys) -> None:
    write(tmp_path, "test_parse.py", MODULE)
    test = chosen_test(tmp_path, "test_parse.py", keyword="bad or ok", pick=2)
    assert test.script.nodeid == "test_parse.py::test_bad_number" and test.failing_seen == [
        "test_parse.py::test_bad_json", "test_parse.py::test_bad_number"]
    assert "3 tests selected; failing test 2: test_parse.py::test_bad_number" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(ReprobotError) as e:
        chosen_test(tmp_path, "test_parse.py", keyword="nothing_matches")
    assert e.value.exit_code == ExitCode.FILE_MISSING and "no test selected" in e.value.message
    with pytest.raises(ReprobotError) as e:
        chosen_test(tmp_path, "test_parse.py", keyword="ok")
    assert e.value.exit_code == ExitCode.NO_FAILURE and "1 test selected, none failed" in e.value.message


PARAMETRIZED = """
    import pytest

    SIZES = [n * 2 for n in range(3)]

    def check(size, label):
        if size > 3:
            raise ValueError(f"{label}: size {size} over 3")

    @pytest.mark.parametrize("size", [1, 2, 5], ids=["one", "two", "five"])
    def test_ids(size):
        check(size, "ids")

    @pytest.mark.parametrize("size, label", [(1, "a"), pytest.param(2 + 2, "b" * 2, id="big-b")])
    def test_param_id(size, label):
        check(size, label)

    @pytest.mark.parametrize("size", SIZES)
    def test_built_in_code(size):
        check(size, "built")

    OBJECTS = [object()]

    @pytest.mark.parametrize("size", OBJECTS)
    def test_no_literal(size):
        raise ValueError(size)
"""


def test_a_parametrized_id_binds_that_parameter_sets_values(tmp_path: Path) -> None:
    write(tmp_path, "test_sizes.py", PARAMETRIZED)
    run = run_pytest(["test_sizes.py"], sys.executable, tmp_path, 120, maxfail=10)     # every failing test at once
    failing = {f["nodeid"]: f for f in run.failures}
    assert sorted(failing) == ["test_sizes.py::test_built_in_code[4]", "test_sizes.py::test_ids[five]",
                               "test_sizes.py::test_no_literal[size0]", "test_sizes.py::test_param_id[big-b]"]
    ids = build_script(failing["test_sizes.py::test_ids[five]"])                 # ids=
    assert ids.params == {"size": "5"} and ids.param_id == "five"
    param = build_script(failing["test_sizes.py::test_param_id[big-b]"])         # pytest.param(..., id=...)
    assert param.params == {"size": "2 + 2", "label": '"b" * 2'}                 # its own source, as written
    built = build_script(failing["test_sizes.py::test_built_in_code[4]"])        # a list built in code: the repr
    assert built.params == {"size": "4"}
    lines = []
    for one in (ids, param, built):
        lines.append(run_alone(one.script, tmp_path))
    assert lines == ["ValueError: ids: size 5 over 3", "ValueError: bb: size 4 over 3", "ValueError: built: size 4 over 3"]
    with pytest.raises(ReprobotError) as e:
        build_script(failing["test_sizes.py::test_no_literal[size0]"])
    assert e.value.exit_code == ExitCode.BAD_INPUT and "parameter 'size'" in e.value.message


# ---- fixtures as plain code -------------------------------------------------------------------------
CONFTEST = """
    import pytest

    @pytest.fixture
    def settings():
        return {"name": "tiny", "layers": 2}

    @pytest.fixture
    def model_dir(tmp_path, settings):
        folder = tmp_path / settings["name"]
        folder.mkdir()
        (folder / "config.json").write_text('{"layers": ' + str(settings["layers"]) + '}')
        yield folder
        raise RuntimeError("the teardown ran")
"""
FIXTURES = """
    import json
    import os
    import pytest

    import helpers

    @pytest.fixture
    def offline(monkeypatch, tmp_path):
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
        monkeypatch.setattr(helpers, "LIMIT", 1)
        monkeypatch.setattr("helpers.MODE", "strict")
        monkeypatch.setitem(helpers.TABLE, "k", "v")
        monkeypatch.chdir(tmp_path)
        return os.environ["HF_HUB_OFFLINE"]

    def test_load(model_dir, offline, capsys):
        print("loading")
        capsys.readouterr()
        assert offline == "1" and os.getcwd() != os.path.dirname(helpers.__file__)
        helpers.check(json.loads((model_dir / "config.json").read_text()))
"""
HELPERS = """
    LIMIT = 10
    MODE = "lenient"
    TABLE = {}

    def check(config):
        raise ValueError(f"{config} {LIMIT} {MODE} {TABLE}")
"""


def test_fixtures_become_plain_code_and_fail_the_same_way(tmp_path: Path) -> None:
    """tmp_path, monkeypatch, capsys, a conftest fixture, a fixture using fixtures, a yield
    fixture whose teardown is dropped: the script holds no fixture and fails as the test does."""
    write(tmp_path, "conftest.py", CONFTEST)
    write(tmp_path, "helpers.py", HELPERS)
    write(tmp_path, "test_load.py", FIXTURES)
    test = chosen_test(tmp_path, "test_load.py::test_load")
    assert test.failure["exc_type"] == "ValueError"
    script = test.script.script
    assert test.script.fixtures == ["tmp_path", "settings", "model_dir", "monkeypatch", "offline", "capsys"]
    assert test.script.kept_as_functions == [] and test.script.conftests == ["conftest.py"]
    body = script.split("# reprobot: the test")[1]
    for plain in ("tmp_path = pathlib.Path(tempfile.mkdtemp())", 'os.environ["HF_HUB_OFFLINE"] = "1"',
                  'os.environ.pop("NOT_SET_ANYWHERE", None)', "helpers.LIMIT = 1",
                  "setattr(pkgutil.resolve_name('helpers'), 'MODE', \"strict\")", 'helpers.TABLE["k"] = "v"',
                  "os.chdir(tmp_path)", "model_dir = folder", 'offline = os.environ["HF_HUB_OFFLINE"]'):
        assert plain in body, plain
    assert "monkeypatch" not in body and "capsys" not in body and "the teardown ran" not in body
    assert "@pytest.fixture" not in script.split("import helpers")[1]      # the inlined defs are gone
    assert run_alone(script, tmp_path) == "ValueError: {'layers': 2} 1 strict {'k': 'v'}"
    assert test.record is not None and test.record.message == "{'layers': 2} 1 strict {'k': 'v'}"
    assert not any("_pytest" in f.path for f in test.record.frames)        # pytest's own frames left out


def test_a_fixture_that_cannot_stand_at_the_top_level_is_called(tmp_path: Path) -> None:
    """A return inside a branch, and a class test with an autouse method fixture."""
    write(tmp_path, "test_branch.py", """
        import pytest

        @pytest.fixture
        def size(tmp_path):
            if tmp_path.exists():
                return 7
            return 0

        class TestThing:
            @pytest.fixture(autouse=True)
            def prepare(self):
                self.limit = 5

            def test_size(self, size):
                assert size <= self.limit, f"{size} over {self.limit}"
    """)
    test = chosen_test(tmp_path, "test_branch.py::TestThing::test_size")
    assert test.script.kept_as_functions == ["size"]
    body = test.script.script.split("# reprobot: the test")[1]
    assert "self = TestThing()" in body and "size = size(tmp_path=tmp_path)" in body and "self.limit = 5" in body
    assert run_alone(test.script.script, tmp_path) == "AssertionError: 7 over 5"


@pytest.mark.parametrize("fixture, definition, said", [
    ("caplog", "", "fixture 'caplog' (pytest's own) has no plain-script form"),
    ("node_name", "@pytest.fixture\ndef node_name(request):\n    return request.node.name\n",
     "fixture 'node_name' uses `request` beyond request.param"),
    ("server", "@pytest.fixture(scope='session')\ndef server():\n    yield 1\n    print('stop')\n",
     "fixture 'server' is session-scoped with a teardown after its yield"),
    ("plugged", "pytest_plugins = ['myplugin']\n", "fixture 'plugged' comes from myplugin"),
])
def test_a_fixture_reprobot_cannot_write_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys, fixture: str, definition: str,
                                                               said: str) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "myplugin.py", "import pytest\n\n@pytest.fixture\ndef plugged():\n    return 1\n")
    write(tmp_path, "conftest.py", "import pytest\n\n" + definition)
    write(tmp_path, "test_refused.py", f"def test_it({fixture}):\n    raise ValueError('boom')\n")
    assert main(["reduce", "test_refused.py::test_it", "--no-reduce", "--runs", "1", "--out", "r"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert said in " ".join(err.split()) and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()                                   # never half-converted, nothing stored


# ---- the command: the launch line lands in the same place, the draft names the test --------------------
STDLIB_TEST = """
    import pytest

    @pytest.fixture
    def rows():
        return [{"id": 1, "tags": "a,b"}, {"id": 2, "tags": None}]

    def split_tags(row):
        return row["tags"].split(",")

    @pytest.mark.parametrize("index", [0, 1], ids=["tagged", "untagged"])
    def test_split(rows, index):
        parts = split_tags(rows[index])
        assert len(parts) >= 1
"""


def test_the_launch_line_lands_where_the_node_id_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "test_tags.py", STDLIB_TEST)
    forms = {"node": ["test_tags.py::test_split[untagged]"],
             "file": ["test_tags.py"],                                            # a test module: its first failing test
             "pytest": ["--", "pytest", "test_tags.py::test_split"],            # both sets: the first failing
             "python -m pytest": ["--", sys.executable, "-m", "pytest", "test_tags.py", "-k", "untagged"]}
    found = {}
    for name, form in forms.items():
        out = tmp_path / name.replace(" ", "_")
        head, tail = (form, []) if form[0] != "--" else ([], form)
        assert main(["reduce", *head, "--no-reduce", "--runs", "1", "--out", str(out), *tail]) == 0, name
        folder = next(out.iterdir())
        found[name] = (json.loads((folder / "signature.json").read_text())["signature"]["id"],
                       (folder / "original.py").read_text(), json.loads((folder / "pytest.json").read_text()))
    assert len({sig for sig, _, _ in found.values()}) == 1 and len({src for _, src, _ in found.values()}) == 1
    assert {record["node"] for _, _, record in found.values()} == {"test_tags.py::test_split[untagged]"}
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("2 tests selected; the first failing one: test_tags.py::test_split[untagged]") == 2
    assert "failing test: test_tags.py::test_split[untagged]" in out


def test_reduce_end_to_end_repro_runs_alone_and_the_draft_names_the_test(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "test_tags.py", STDLIB_TEST)
    assert main(["reduce", "test_tags.py::test_split[untagged]", "--runs", "1", "--no-env", "--max-time", "60",
                 "--out", "repros"]) == 0
    folder = next((tmp_path / "repros").iterdir())
    repro = (folder / "repro.py").read_text()
    assert "pytest" not in repro and "def test_" not in repro
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "repro.py").write_text(repro)
    proc = subprocess.run([sys.executable, "repro.py"], cwd=empty, capture_output=True, text=True, timeout=60)
    assert proc.stderr.strip().splitlines()[-1] == "AttributeError: 'NoneType' object has no attribute 'split'"
    record = json.loads((folder / "pytest.json").read_text())
    sig = json.loads((folder / "signature.json").read_text())["signature"]
    assert record["same_signature"] and record["pytest_signature"]["id"] == sig["id"]
    from bot.issue.draft import build_draft
    body = build_draft(folder, "transformers").body
    assert "The original is a failing pytest test, `test_tags.py::test_split[untagged]` (parameter set " \
           "`untagged`; its fixtures (`rows`) written as plain code), run as a plain script" in " ".join(body.split())


def test_a_failure_that_needs_pytest_is_said_plainly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """pytest's ini turns a warning into an error (the plain script only warns); a conftest hook
    sets what the test reads (the plain script fails otherwise): one line each, nothing stored."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "test_warns.py", "import warnings\n\ndef test_w():\n    warnings.warn('old API', DeprecationWarning)\n")
    write(tmp_path, "conftest.py", "import os\n\ndef pytest_configure(config):\n    os.environ['MODE'] = 'from-hook'\n")
    write(tmp_path, "test_hook.py", "import os\n\ndef test_h():\n    raise KeyError(os.environ.get('MODE', 'unset'))\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    assert main(["reduce", "test_warns.py::test_w", "--no-reduce", "--runs", "1", "--out", "r"]) == ExitCode.NO_FAILURE
    err = " ".join(capsys.readouterr().err.split())
    assert "test_warns.py::test_w: fails under pytest (DeprecationWarning: old API) but not as a plain script" in err
    assert main(["reduce", "test_hook.py::test_h", "--no-reduce", "--runs", "1", "--out", "r"]) == ExitCode.NO_FAILURE
    err = " ".join(capsys.readouterr().err.split())
    assert "test_hook.py::test_h: as a plain script it fails with KeyError: 'unset', not with the test's " \
           "KeyError: 'from-hook'" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("target, code, said", [
    ("notes.txt::test_x", ExitCode.NOT_PYTHON, "a test node names a Python test file"),
    ("missing_test.py::test_x", ExitCode.FILE_MISSING, "no such file"),
    ("data.csv", ExitCode.NOT_PYTHON, "does not parse"),
])
def test_a_path_that_is_no_script_notebook_or_test_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys, target: str, code: int, said: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("def test_x(): pass\n")
    (tmp_path / "data.csv").write_text("a,b\n1,2 3\n")
    assert main(["reduce", target, "--no-reduce", "--runs", "1", "--out", "r"]) == code
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
