"""A Jupyter notebook read as one program: its code cells in order, exported to a plain script.

`reprobot reduce nb.ipynb` reduces that script exactly as it reduces any other (issue #43). The
notebook's own syntax is decided here, line by line, and never run as Python:

* ``!pip install X`` / ``%pip install X`` lines are the notebook's install record: the packages
  are kept (``Notebook.requirements``) and the line is not run: reprobot never installs anything.
* Timing and display-only magics are dropped: ``%time STMT`` / ``%timeit STMT`` keep ``STMT``
  (it runs once); a ``%%time`` / ``%%timeit`` / ``%%capture`` cell keeps its body;
  ``%matplotlib``, ``%load_ext autoreload``, ``%autoreload``, ``%config`` and the like, help
  lines (``obj?``) and cells of ``%%html`` / ``%%markdown`` / ``%%latex`` / ``%%javascript``
  go. ``%env NAME=VALUE`` becomes ``os.environ[...] = ...`` (a notebook sets it for the code below).
* Any other magic or shell line (``!ls``, ``%cd``, ``%%bash``, ``x = !cmd``) is refused with one
  line naming the cell and the line: what it does to the machine cannot be reproduced by a script.
* ``display(...)`` is a notebook built-in: when the code calls it without defining or importing
  it, a two-line ``display`` that prints each object's repr is defined before the first cell
  that calls it (after that cell's imports). It keeps
  what a notebook computes (the repr runs, and can fail, as it does in the notebook) without
  needing IPython where the repro runs, and the reducer removes it when the failure does not
  need it.

Every line of the script maps back to (code cell, line in the cell), so the failing cell can be
named. Cells are numbered among the code cells, from 1, as a reader counts them down the
notebook (markdown cells are not counted). A notebook's saved error output (``output_type:
"error"``) is read for ``--from-outputs``. The standard library and libcst only: the reducer's
own input (reducer/failure/original.py) calls it, and the bot's side is bot/notebook.py.
"""
from __future__ import annotations

import ast
import io
import json
import re
import shlex
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reducer.errors import ExitCode, ReprobotError

SUFFIX = ".ipynb"

# Line magics whose only effect is on display, timing or the kernel's reloading: dropped.
DROPPED_LINE_MAGICS = {"matplotlib", "autoreload", "aimport", "config", "pprint", "precision", "who", "whos",
                       "who_ls", "lsmagic", "magic", "history", "xmode", "colors", "page", "pinfo", "pinfo2",
                       "psearch", "pdef", "pdoc", "psource", "pfile", "doctest_mode", "automagic", "notebook"}
# Line magics that run the rest of the line once, as a statement: the statement is kept.
STATEMENT_LINE_MAGICS = {"time", "timeit", "prun"}
# Cell magics whose body is Python run once: the body is kept.
KEPT_CELL_MAGICS = {"time", "timeit", "capture", "prun"}
# Cell magics whose body is not Python and only displays something: the cell is dropped.
DISPLAY_CELL_MAGICS = {"html", "markdown", "latex", "javascript", "js", "svg"}
# load_ext of these extensions is display or reloading only.
DROPPED_EXTENSIONS = {"autoreload", "tensorboard", "rich", "line_profiler", "memory_profiler"}

_DISPLAY_PRELUDE = ("def display(*objs, **kwargs):  # a notebook shows each object; a script prints its repr\n"
                    "    print(*map(repr, objs))\n")
_HELP = re.compile(r"^\s*(\?\??[\w.]+|[\w.]+\?\??)\s*$")
_MAGIC_START = re.compile(r"^\s*(!|%)")
_ASSIGNED_MAGIC = re.compile(r"^\s*[\w.,\s\[\]()]+=\s*(!|%)")


@dataclass(frozen=True)
class Place:
    """Where a line of the exported script came from."""

    cell: int        # code cell number, from 1, in notebook order
    line: int        # line within that cell, from 1

    def words(self) -> str:
        return f"cell {self.cell}, line {self.line}"


@dataclass(frozen=True)
class SavedError:
    """The error output a notebook run left in the file (nbformat ``output_type: "error"``)."""

    cell: int
    ename: str
    evalue: str
    traceback: str          # the saved lines, colour codes removed
    execution_count: int | None = None

    def one_line(self) -> str:
        return f"{self.ename}: {self.evalue}".strip()

    def to_dict(self) -> dict[str, Any]:
        return {"cell": self.cell, "ename": self.ename, "evalue": self.evalue,
                "execution_count": self.execution_count}


@dataclass
class Notebook:
    """A notebook exported to one script, with the way back from script lines to cells."""

    path: Path
    script: str
    places: list[Place | None]                  # places[i] is script line i + 1; None: added by the export
    cells: list[str]                            # each code cell's source, as saved
    execution_counts: list[int | None]
    requirements: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)     # "cell 3, line 1: %%time", in order
    saved_error: SavedError | None = None

    def place(self, lineno: int | None) -> Place | None:
        if lineno is None or not 1 <= lineno <= len(self.places):
            return None
        return self.places[lineno - 1]

    def to_dict(self) -> dict[str, Any]:
        return {"notebook": self.path.name, "code_cells": len(self.cells), "requirements": self.requirements,
                "dropped": self.dropped,
                "saved_error": self.saved_error.to_dict() if self.saved_error else None}


def is_notebook(path: Path, raw: bytes | None = None) -> bool:
    """A ``.ipynb`` file, or any JSON object saved with nbformat's keys under another name (even
    ``.py``: such a file compiles as Python and would run as a dict literal)."""
    if path.suffix.lower() == SUFFIX:
        return True
    if raw is None or not raw.lstrip()[:1] == b"{":
        return False
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "cells" in data and "nbformat" in data


def refuse_json(path: Path, text: str) -> None:
    """A file that is JSON but not a notebook is not a script either, whatever its name (JSON's
    ``null`` and ``true`` are names to Python: such a file "runs" and fails with a NameError of
    its own; one that does not is a bare literal, which has no failure to reduce)."""
    if text.lstrip()[:1] not in ("{", "["):
        return
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return
    raise ReprobotError(f"{path}: JSON, not a Python script or a Jupyter notebook (nbformat 4)", ExitCode.NOT_PYTHON)


def read_notebook(path: Path, raw: bytes) -> Notebook:
    """The notebook at ``path`` (its bytes ``raw``) exported; one line and ``NOT_PYTHON`` or
    ``BAD_INPUT`` when it is not a notebook reprobot can run as a script."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ReprobotError(f"{path}: not a Jupyter notebook (not UTF-8 text)", ExitCode.NOT_PYTHON) from None
    except (ValueError, RecursionError) as e:
        raise ReprobotError(f"{path}: not a Jupyter notebook (invalid JSON: {str(e)[:80]})",
                            ExitCode.NOT_PYTHON) from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ReprobotError(f"{path}: not a Jupyter notebook (no list of cells)", ExitCode.NOT_PYTHON)
    major = data.get("nbformat")
    if major != 4:
        raise ReprobotError(f"{path}: nbformat {major!r} notebook; only nbformat 4 is read "
                            "(save it again from Jupyter 4+ or Colab)", ExitCode.BAD_INPUT)
    meta = _mapping(data.get("metadata"))
    language = _mapping(meta.get("kernelspec")).get("language") or _mapping(meta.get("language_info")).get("name") \
        or "python"
    if str(language).lower() != "python":
        raise ReprobotError(f"{path}: a {str(language)[:40]!r} notebook; only Python notebooks are reduced",
                            ExitCode.BAD_INPUT)
    cells, counts, errors = [], [], []
    for cell in data["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise ReprobotError(f"{path}: code cell {len(cells) + 1} has no text source", ExitCode.BAD_INPUT)
        cells.append(source)
        count = cell.get("execution_count")
        counts.append(count if isinstance(count, int) else None)
        errors.append(_saved_error(cell, len(cells), counts[-1]))
    if not any(c.strip() for c in cells):
        raise ReprobotError(f"{path}: the notebook has no code cells, nothing to run", ExitCode.BAD_INPUT)
    nb = _export(path, cells, counts)
    nb.saved_error = next((e for e in errors if e is not None), None)
    return nb


def _mapping(value: Any) -> dict:
    """A field the file should hold as an object, or an empty one (a hand-edited file may not)."""
    return value if isinstance(value, dict) else {}


def _saved_error(cell: dict, number: int, count: int | None) -> SavedError | None:
    outputs = cell.get("outputs")
    for out in outputs if isinstance(outputs, list) else []:
        if isinstance(out, dict) and out.get("output_type") == "error":
            lines = out.get("traceback") or []
            text = "\n".join(_ANSI.sub("", str(line)) for line in lines) if isinstance(lines, list) else ""
            return SavedError(number, str(out.get("ename") or ""), str(out.get("evalue") or ""), text, count)
    return None


# Python 3.12+ tokenizes an f-string in parts; a multi-line one spans these two.
_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)
_FSTRING_END = getattr(tokenize, "FSTRING_END", -1)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# ---- the export ----------------------------------------------------------------------------------
class _Builder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []
        self.places: list[Place | None] = []
        self.requirements: list[str] = []
        self.dropped: list[str] = []

    def add(self, text: str, place: Place | None) -> None:
        self.lines.append(text)
        self.places.append(place)

    def refuse(self, place: Place, line: str, why: str) -> None:
        raise ReprobotError(f"{self.path}: {place.words()}: {line.strip()[:120]!r}: {why}; reprobot does not "
                            "run it (rewrite it as Python, or remove it, and reduce again)", ExitCode.NOT_PYTHON)


def _export(path: Path, cells: list[str], counts: list[int | None]) -> Notebook:
    b = _Builder(path)
    starts = []
    for number, source in enumerate(cells, 1):
        starts.append(len(b.lines))
        _export_cell(b, number, source)
        b.add("", None)          # a blank line between cells: a cell's last block ends there
    lines, places = list(b.lines), list(b.places)
    if _uses_display("\n".join(lines)):
        at = _display_at(lines, starts)
        prelude = _DISPLAY_PRELUDE.rstrip("\n").split("\n")
        lines[at:at] = prelude
        places[at:at] = [None] * len(prelude)
    script = "\n".join(lines).rstrip("\n") + "\n"
    try:
        compile(script, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        where = places[e.lineno - 1] if e.lineno and 0 < e.lineno <= len(places) else None
        raise ReprobotError(f"{path}: {where.words() if where else f'line {e.lineno}'}: does not parse ({e.msg})",
                            ExitCode.NOT_PYTHON) from None
    import libcst      # the reducer edits it with libcst: a script it cannot parse is refused here
    try:
        libcst.parse_module(script)
    except libcst.ParserSyntaxError as e:
        where = places[e.raw_line - 1] if 0 < e.raw_line <= len(places) else None
        raise ReprobotError(f"{path}: {where.words() if where else f'line {e.raw_line}'}: libcst cannot parse it "
                            f"({e.message})", ExitCode.NOT_PYTHON) from None
    return Notebook(path, script, places, cells, counts, _unique(b.requirements), b.dropped)


def _export_cell(b: _Builder, number: int, source: str) -> None:
    lines = source.splitlines()
    first = 0
    if lines and lines[0].lstrip().startswith("%%"):
        name = lines[0].strip()[2:].split(None, 1)[0] if lines[0].strip()[2:] else ""
        place = Place(number, 1)
        if name in DISPLAY_CELL_MAGICS:
            b.dropped.append(f"{place.words()}: %%{name} (the whole cell: it only displays)")
            return
        if name not in KEPT_CELL_MAGICS:
            b.refuse(place, lines[0], f"the cell magic %%{name or '?'} is not Python")
        b.dropped.append(f"{place.words()}: {lines[0].strip()}")
        first = 1
    magic_rows = _magic_rows(lines, first)
    for i in range(first, len(lines)):
        place = Place(number, i + 1)
        line = lines[i]
        if i in magic_rows:
            _export_magic(b, place, line)
        else:
            b.add(line, place)


def _magic_rows(lines: list[str], first: int) -> set[int]:
    """Rows that are notebook syntax (``!``, ``%``, help): those that look like it and are not
    inside a multi-line string of the cell (a docstring may well start a line with ``%``), nor a
    continuation line (``% b`` inside brackets or after a backslash is Python's modulo)."""
    looks = {i for i in range(first, len(lines))
             if _MAGIC_START.match(lines[i]) or _HELP.match(lines[i]) or _ASSIGNED_MAGIC.match(lines[i])}
    looks = {i for i in looks if not (i > first and lines[i - 1].rstrip().endswith("\\"))}
    if not looks:
        return looks
    probe = [(_indent(line) + "pass") if i in looks else line for i, line in enumerate(lines)]
    python: set[int] = set()
    depth, seen_rows, fstring_rows = 0, set(), []
    try:
        for tok in tokenize.generate_tokens(io.StringIO("\n".join(probe[first:]) + "\n").readline):
            row = tok.start[0] + first - 1
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                python.update(range(row + 1, tok.end[0] + first))     # rows after the opening one
            elif tok.type == _FSTRING_START:
                fstring_rows.append(row)
            elif tok.type == _FSTRING_END and fstring_rows:
                python.update(range(fstring_rows.pop() + 1, tok.end[0] + first))
            if row in looks and row not in seen_rows:
                seen_rows.add(row)
                if depth > 0:
                    python.add(row)
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth = max(0, depth - 1)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass            # the cell does not tokenize: every look-alike is taken as syntax, compile() says the rest
    return looks - python


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def _export_magic(b: _Builder, place: Place, line: str) -> None:
    indent, text = _indent(line), line.strip()
    keep_block = indent + "pass"        # inside a block, a dropped line still needs a statement
    if _HELP.match(line):
        b.dropped.append(f"{place.words()}: {text} (help)")
        if indent:
            b.add(keep_block, place)
        return
    if _ASSIGNED_MAGIC.match(line) and not _MAGIC_START.match(line):
        b.refuse(place, line, "assigning the output of a shell command or magic is not Python")
    if text.startswith("!"):
        packages = _pip_install(text[1:])
        if packages is None:
            b.refuse(place, line, "a shell command")
        _record_install(b, place, text, packages, indent)
        return
    name, _, rest = text[1:].partition(" ")
    rest = rest.strip()
    if name == "pip":
        packages = _pip_install("pip " + rest)
        if packages is None:
            b.refuse(place, line, "a %pip command other than install")
        _record_install(b, place, text, packages, indent)
    elif name in STATEMENT_LINE_MAGICS and rest:
        b.dropped.append(f"{place.words()}: %{name} (its statement kept)")
        statement = _without_options(name, rest)
        b.add(indent + statement, place)
    elif name in DROPPED_LINE_MAGICS or name in STATEMENT_LINE_MAGICS or \
            (name == "load_ext" and rest in DROPPED_EXTENSIONS):       # a bare `%time` too
        b.dropped.append(f"{place.words()}: {text}")
        if indent:
            b.add(keep_block, place)
    elif name == "env" and "=" in rest and " " not in rest.split("=", 1)[0]:
        key, value = (s.strip() for s in rest.split("=", 1))
        b.add(f"{indent}__import__('os').environ[{key!r}] = {value!r}", place)
    else:
        b.refuse(place, line, f"the magic %{name} is not Python" if text.startswith("%") else "not Python")


def _without_options(name: str, rest: str) -> str:
    """``%timeit -n 10 -r 3 f(x)`` → ``f(x)``: timeit's and prun's own options go."""
    if name == "time":
        return rest
    words = rest.split()
    i = 0
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in ("-n", "-r", "-s", "-T", "-D", "-l") else 1
    return " ".join(words[i:]) or "pass"


def _record_install(b: _Builder, place: Place, text: str, packages: list[str], indent: str) -> None:
    b.requirements.extend(packages)
    b.dropped.append(f"{place.words()}: {text} (recorded, not run)")
    if indent:
        b.add(indent + "pass", place)


_PIP_VALUE_OPTIONS = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
                      "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--platform",
                      "--python-version", "--implementation", "--abi", "--progress-bar", "--cache-dir"}


def _pip_install(command: str) -> list[str] | None:
    """The packages of ``pip install ...`` (also ``pip3``, ``python -m pip``); None when the
    command is anything else."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:3] in (["python", "-m", "pip"], ["python3", "-m", "pip"]):
        words = ["pip", *words[3:]]
    if len(words) < 2 or words[0] not in ("pip", "pip3") or words[1] != "install":
        return None
    packages, skip = [], False
    for word in words[2:]:
        if skip:
            skip = False
        elif word in _PIP_VALUE_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            packages.append(word)
    return packages


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _display_at(lines: list[str], starts: list[int]) -> int:
    """Where the ``display`` prelude goes: in the first cell that calls it, after that cell's
    leading imports. Not at the top: a script's leading block of imports is what its warm
    interpreters import ahead (reducer/run/zygote.py:warm_imports), and a cell starts at the top
    level, so a definition there is valid wherever the cell is."""
    ends = starts[1:] + [len(lines)]
    for start, end in zip(starts, ends):
        text = "\n".join(lines[start:end])
        if not re.search(r"\bdisplay\s*\(", text):
            continue
        try:
            body = ast.parse(text).body
        except (SyntaxError, ValueError, RecursionError):
            return start
        after = 0
        for node in body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                break
            after = node.end_lineno or after
        return start + after
    return 0


def _uses_display(script: str) -> bool:
    if not re.search(r"\bdisplay\s*\(", script):
        return False
    return not re.search(r"^\s*(def\s+display\b|display\s*=|(from\s+\S+\s+)?import\b.*\bdisplay\b)", script, re.M)


# ---- which cell failed ---------------------------------------------------------------------------
def failing_place(nb: Notebook, frames, script_name: str) -> Place | None:
    """The cell that was running when the failure was raised: the outermost frame of the
    exported script (its module level; a helper defined in an earlier cell is only where the
    failure went through)."""
    for frame in frames:
        if Path(frame.path).name == script_name and frame.func == "<module>":
            return nb.place(frame.lineno)
    return None


def failing_line(nb: Notebook, place: Place) -> str:
    lines = nb.cells[place.cell - 1].splitlines()
    return lines[place.line - 1].strip() if 0 < place.line <= len(lines) else ""


def describe_cell(nb: Notebook, place: Place) -> str:
    """``cell 6 (In [6]), line 2: model = get_peft_model(base, lora)`` — as printed and drafted."""
    count = nb.execution_counts[place.cell - 1]
    shown = f"cell {place.cell}" + (f" (In [{count}])" if count is not None else "")
    line = failing_line(nb, place)
    return f"{shown}, line {place.line}" + (f": {line[:120]}" if line else "")
