"""`reprobot reduce nb.ipynb` (issue #43): a notebook's code cells exported to one script, its
notebook syntax decided line by line and never run as Python, the failing cell reported (on
screen, in notebook.json, in the draft), a file that is neither a script nor a notebook refused
before anything runs, and `--from-outputs` read and confirmed by a real run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main
from reducer.errors import ExitCode, ReprobotError
from reducer.failure.notebook import read_notebook


def notebook(cells: list, path: Path | None = None, **top) -> dict:
    """nbformat 4 JSON as Jupyter saves it: a markdown cell, then the code cells (a cell is its
    source, or (source, outputs))."""
    code = []
    for n, cell in enumerate(cells, 1):
        source, outputs = (cell, []) if isinstance(cell, str) else cell
        code.append({"cell_type": "code", "execution_count": n, "id": f"c{n}", "metadata": {},
                     "outputs": outputs, "source": source.splitlines(keepends=True)})
    nb = {"cells": [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": ["# notes\n"]}, *code],
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5, **top}
    if path is not None:
        path.write_text(json.dumps(nb), encoding="utf-8")
    return nb


def export(cells: list, tmp_path: Path):
    path = tmp_path / "nb.ipynb"
    notebook(cells, path)
    return read_notebook(path, path.read_bytes())


# ---- the export: each kind of notebook line ---------------------------------------------------------
def test_pip_installs_are_recorded_and_never_in_the_script(tmp_path: Path) -> None:
    nb = export(["!pip install -q transformers==5.23.0 peft -U --index-url https://x.invalid/simple\n"
                 "%pip install torch\n!python -m pip install accelerate", "x = 1"], tmp_path)
    assert nb.requirements == ["transformers==5.23.0", "peft", "torch", "accelerate"]
    assert "pip" not in nb.script and "x = 1" in nb.script
    assert any("(recorded, not run)" in d for d in nb.dropped)


def test_timing_magics_keep_their_code_and_display_magics_go(tmp_path: Path) -> None:
    nb = export(["%matplotlib inline\n%load_ext autoreload\n%autoreload 2\n%config InlineBackend.figure_format = 'retina'",
                 "%%time\na = 1\nb = a + 1",
                 "%time c = b * 2\n%timeit -n 3 -r 1 d = c + 1",
                 "%%html\n<b>not python</b>",
                 "len?\n??print\ne = 5"], tmp_path)
    script = nb.script
    for kept in ("a = 1", "b = a + 1", "c = b * 2", "d = c + 1", "e = 5"):
        assert kept in script.splitlines()
    for gone in ("%", "<b>", "?"):
        assert gone not in script
    namespace: dict = {}
    exec(compile(script, "nb", "exec"), namespace)          # the export is plain Python that runs
    assert (namespace["b"], namespace["c"], namespace["d"], namespace["e"]) == (2, 4, 5, 5)


def test_lines_that_only_look_like_magics_stay_python(tmp_path: Path) -> None:
    """A docstring line starting with `%`, a modulo continued in brackets or after a backslash."""
    nb = export(['def f(n):\n    """Format:\n%d items\n    !important\n    """\n    return (n\n% 3)',
                 "g = 7 \\\n% 4\nprint(f(5), g)"], tmp_path)
    assert "%d items" in nb.script and "!important" in nb.script and "% 3)" in nb.script and "% 4" in nb.script
    assert nb.dropped == []


def test_a_magic_inside_a_block_leaves_a_statement(tmp_path: Path) -> None:
    nb = export(["for i in range(2):\n    %time x = i\n    %matplotlib inline\nprint(x)"], tmp_path)
    assert "    x = i" in nb.script and "    pass" in nb.script
    compile(nb.script, "nb", "exec")


def test_env_magic_sets_the_variable(tmp_path: Path) -> None:
    nb = export(["%env TOKENIZERS_PARALLELISM=false\nimport os\nassert os.environ['TOKENIZERS_PARALLELISM'] == 'false'"],
                tmp_path)
    exec(compile(nb.script, "nb", "exec"), {})


def test_display_is_defined_only_where_the_notebook_relies_on_it(tmp_path: Path, capfd) -> None:
    nb = export(["x = [1, 2]\ndisplay(x)"], tmp_path)
    assert nb.script.startswith("def display(") and nb.place(1) is None
    exec(compile(nb.script, "nb", "exec"), {})
    assert capfd.readouterr().out == "[1, 2]\n"
    # after the imports that lead the script: they are what warm interpreters import ahead
    lines = export(["import json\nimport os", "x = 1", "import sys\ndisplay(json)", "display(os)"],
                   tmp_path).script.splitlines()
    assert lines[:2] == ["import json", "import os"] and lines.index("import sys") + 1 == \
        next(i for i, line in enumerate(lines) if line.startswith("def display("))
    assert not export(["from IPython.display import display\ndisplay(1)"], tmp_path).script.startswith("def display(")
    assert not export(["print(1)"], tmp_path).script.startswith("def display(")


def test_script_lines_map_back_to_cells(tmp_path: Path) -> None:
    nb = export(["!pip install peft\nimport os", "%%time\na = 1\nb = 2", "display(a)"], tmp_path)
    lines = nb.script.splitlines()
    where = {lines[i]: nb.place(i + 1) for i in range(len(lines)) if nb.place(i + 1)}
    assert (where["import os"].cell, where["import os"].line) == (1, 2)
    assert (where["b = 2"].cell, where["b = 2"].line) == (2, 3)
    assert (where["display(a)"].cell, where["display(a)"].line) == (3, 1)


@pytest.mark.parametrize("line, said", [
    ("!ls -la", "a shell command"),
    ("!pip uninstall -y peft", "a shell command"),
    ("%cd /tmp", "the magic %cd"),
    ("files = !ls", "assigning the output"),
    ("%%bash\necho hi", "the cell magic %%bash"),
    ("%%writefile x.py\nprint(1)", "the cell magic %%writefile"),
    ("%run other.py", "the magic %run"),
])
def test_any_other_magic_or_shell_line_is_refused_naming_cell_and_line(tmp_path: Path, line: str, said: str) -> None:
    with pytest.raises(ReprobotError) as e:
        export(["import os", f"x = 1\n{line}" if not line.startswith("%%") else line], tmp_path)
    assert e.value.exit_code == ExitCode.NOT_PYTHON and said in e.value.message
    where = "cell 2, line 1" if line.startswith("%%") else "cell 2, line 2"
    assert where in e.value.message and "\n" not in e.value.message


def test_a_syntax_error_names_the_cell(tmp_path: Path) -> None:
    with pytest.raises(ReprobotError) as e:
        export(["x = 1", "y = = 2"], tmp_path)
    assert "cell 2, line 1" in e.value.message and e.value.exit_code == ExitCode.NOT_PYTHON


# ---- the command: refused before anything runs ------------------------------------------------------
SENTINEL = "import pathlib; pathlib.Path('ran.txt').write_text('x')\n"


def _refused(args: list[str], code: int, capsys) -> str:
    assert main(["reduce", *args, "--no-reduce", "--runs", "1", "--out", "repros"]) == code
    captured = capsys.readouterr()
    err = [ln for ln in (captured.err + captured.out).splitlines() if ln.strip()]
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert not Path("ran.txt").exists() and not Path("repros").exists()    # nothing ran, nothing stored
    return err[0]


def test_refused_notebooks_never_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    notebook([SENTINEL, "!ls"], tmp_path / "shell.ipynb")
    assert "cell 2, line 1" in _refused(["shell.ipynb"], ExitCode.NOT_PYTHON, capsys)
    (tmp_path / "broken.ipynb").write_text('{"cells": [')
    assert "invalid JSON" in _refused(["broken.ipynb"], ExitCode.NOT_PYTHON, capsys)
    (tmp_path / "binary.ipynb").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    assert "not a Jupyter notebook" in _refused(["binary.ipynb"], ExitCode.NOT_PYTHON, capsys)
    nb = notebook([], tmp_path / "empty.ipynb")
    assert "no code cells" in _refused(["empty.ipynb"], ExitCode.BAD_INPUT, capsys)
    nb["nbformat"] = 3
    (tmp_path / "old.ipynb").write_text(json.dumps(nb))
    assert "nbformat 3" in _refused(["old.ipynb"], ExitCode.BAD_INPUT, capsys)


def test_json_that_is_not_a_notebook_is_refused_without_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys) -> None:
    """The issue's case: JSON compiles as Python (`null` is a name) and used to be run and reduced."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "settings.json").write_text('{"execution_count": null, "cells": 3}\n')
    compile((tmp_path / "settings.json").read_text(), "x", "exec")       # it is valid Python, and still refused
    assert "JSON, not a Python script or a Jupyter notebook" in _refused(["settings.json"], ExitCode.NOT_PYTHON, capsys)
    (tmp_path / "renamed.py").write_text('[{"a": true}, null]\n')                  # whatever its name
    assert "JSON, not a Python script" in _refused(["renamed.py"], ExitCode.NOT_PYTHON, capsys)
    # a notebook saved under another name is a notebook
    notebook(["raise ValueError('boom')"], tmp_path / "export.json")
    assert main(["reduce", "export.json", "--no-reduce", "--runs", "1", "--out", "repros"]) == 0
    assert "ValueError" in capsys.readouterr().out


# ---- the command: real runs --------------------------------------------------------------------------
CELLS = [
    "!pip install -q torch\nimport json",
    "def check(items):\n    # the helper a later cell calls: the failure is raised in here\n"
    "    if len(items) > 2:\n        raise ValueError(f'too many items: {len(items)}')\n    return items",
    "%%time\nsmall = check([1, 2])\ndisplay(small)",
    "%matplotlib inline\n%time n = 3\nitems = list(range(n))\nbig = check(items)",
    "print('after the failing cell')",
]


def test_the_failing_cell_is_reported_and_the_repro_is_a_plain_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys) -> None:
    monkeypatch.chdir(tmp_path)
    notebook(CELLS, tmp_path / "explore.ipynb")
    assert main(["reduce", "explore.ipynb", "--runs", "1", "--no-env", "--max-time", "60",
                 "--as-notebook", "--out", "repros"]) == 0
    out = capsys.readouterr().out
    assert "failing cell: cell 4 (In [4]), line 4: big = check(items)" in " ".join(out.split())
    assert "pip install torch" in out                                        # the install record, shown
    folder = next((tmp_path / "repros").iterdir())
    record = json.loads((folder / "notebook.json").read_text())
    assert record["failing_cell"] == {"cell": 4, "line": 4, "execution_count": 4, "text": "big = check(items)"}
    assert record["requirements"] == ["torch"]
    repro = (folder / "repro.py").read_text()
    assert "%" not in repro and "!" not in repro and "too many items" in repro
    compile(repro, "repro.py", "exec")
    one_cell = json.loads((folder / "repro.ipynb").read_text())
    assert [c["cell_type"] for c in one_cell["cells"]] == ["code"] and "".join(one_cell["cells"][0]["source"]) == repro
    from bot.issue.draft import build_draft
    body = build_draft(folder, "transformers").body
    assert "Jupyter notebook (`explore.ipynb`, 5 code cells run in order as one script; it failed in cell 4 (In [4]), " \
           "line 4: `big = check(items)`)" in body


def _saved_error(ename: str, evalue: str) -> list[dict]:
    return [{"output_type": "error", "ename": ename, "evalue": evalue,
             "traceback": ["\x1b[0;31m----\x1b[0m", f"\x1b[0;31m{ename}\x1b[0m: {evalue}"]}]


def test_from_outputs_reports_the_saved_failure_then_confirms_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys) -> None:
    monkeypatch.chdir(tmp_path)
    cells = list(CELLS)
    cells[3] = (CELLS[3], _saved_error("ValueError", "too many items: 3"))
    notebook(cells, tmp_path / "saved.ipynb")
    assert main(["reduce", "saved.ipynb", "--from-outputs", "--no-reduce", "--runs", "1", "--out", "repros"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    said, confirmed = out.index("saved output: cell 4 (In [4]) failed with ValueError: too many items: 3"), \
        out.index("confirmed: the run fails as the notebook's saved output says")
    assert said < out.index("failure ") < confirmed              # reported before the run, confirmed after
    record = json.loads(next((tmp_path / "repros").iterdir()).joinpath("notebook.json").read_text())
    assert record["from_outputs"] == {"confirmed": True, "same_failure": True, "same_cell": True}


def test_from_outputs_says_plainly_when_the_run_does_not_confirm_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys) -> None:
    monkeypatch.chdir(tmp_path)
    cells = list(CELLS)
    cells[2] = (CELLS[2], _saved_error("KeyError", "'labels'"))          # an older run's error, another cell
    notebook(cells, tmp_path / "stale.ipynb")
    assert main(["reduce", "stale.ipynb", "--from-outputs", "--no-reduce", "--runs", "1", "--out", "repros"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not confirmed: the saved output says KeyError: 'labels' in cell 3, but the run fails with " \
           "ValueError: too many items: 3 in cell 4" in out
    # the same cell, another exception than the saved one
    cells[2], cells[3] = CELLS[2], (CELLS[3], _saved_error("ValueError", "labels must be ints"))
    notebook(cells, tmp_path / "edited.ipynb")
    assert main(["reduce", "edited.ipynb", "--from-outputs", "--no-reduce", "--runs", "1", "--out", "r1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not confirmed: the saved output says ValueError: labels must be ints in cell 4, but the run fails with " \
           "ValueError: too many items: 3;" in out
    # a notebook that no longer fails at all: one line, the saved failure named
    notebook([(CELLS[0], _saved_error("ValueError", "boom")), "print('fine now')"], tmp_path / "fixed.ipynb")
    assert main(["reduce", "fixed.ipynb", "--from-outputs", "--no-reduce", "--runs", "1", "--out", "r2"]) == ExitCode.NO_FAILURE
    assert "not confirmed: the notebook's saved output shows ValueError: boom in cell 1" in capsys.readouterr().err
    # nothing saved to read
    notebook(CELLS, tmp_path / "plain.ipynb")
    assert main(["reduce", "plain.ipynb", "--from-outputs", "--no-reduce", "--out", "r3"]) == ExitCode.BAD_INPUT
    assert "no cell has a saved error output" in capsys.readouterr().err


def test_a_notebooks_saved_outputs_do_not_count_against_the_script_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        capsys) -> None:
    monkeypatch.chdir(tmp_path)
    plot = [{"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBOR" + "A" * 20_000}}]
    notebook([("x = 1", plot), "raise ValueError('small code')"], tmp_path / "plots.ipynb")
    assert main(["reduce", "plots.ipynb", "--max-script-size", "1000", "--no-reduce", "--runs", "1", "--out", "r"]) == 0
    notebook([f"x = {'1' * 2000}", "raise ValueError('big code')"], tmp_path / "code.ipynb")
    assert main(["reduce", "code.ipynb", "--max-script-size", "1000", "--no-reduce", "--out", "r"]) == ExitCode.TOO_LARGE
    assert "over the 1,000-byte cap" in capsys.readouterr().err


@pytest.mark.parametrize("data, code, said", [
    ({"cells": "abc", "nbformat": 4}, ExitCode.NOT_PYTHON, "no list of cells"),
    ([1, 2], ExitCode.NOT_PYTHON, "no list of cells"),
    ({"cells": [{"cell_type": "code", "source": ["x = 1\n", 5]}], "nbformat": 4}, ExitCode.BAD_INPUT, "no text source"),
    ({"cells": [5, None, {"cell_type": "markdown", "source": "x"}], "nbformat": 4}, ExitCode.BAD_INPUT, "no code cells"),
    ({"cells": [{"cell_type": "code", "source": "x = 1"}], "nbformat": 4,
      "metadata": {"kernelspec": "odd", "language_info": {"name": "R"}}}, ExitCode.BAD_INPUT, "'R' notebook"),
])
def test_a_malformed_notebook_is_one_line(tmp_path: Path, data, code: int, said: str) -> None:
    path = tmp_path / "odd.ipynb"
    path.write_text(json.dumps(data))
    with pytest.raises(ReprobotError) as e:
        read_notebook(path, path.read_bytes())
    assert e.value.exit_code == code and said in e.value.message


def test_odd_fields_a_notebook_can_do_without_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "odd.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "x = 1", "outputs": 5}],
                                "nbformat": 4, "metadata": [1]}))
    nb = read_notebook(path, path.read_bytes())
    assert nb.script == "x = 1\n" and nb.saved_error is None
