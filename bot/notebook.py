"""`reprobot reduce nb.ipynb`: the notebook's side of the command and of the draft (issue #43).

reducer/failure/notebook.py exports the notebook to one script; the reduction then runs on that script
exactly as on any other. This module says what the command prints about the notebook (the cell
that failed, the saved error output under ``--from-outputs`` and whether the run confirms it),
records it in the repro folder's ``notebook.json`` (the draft's sentence about the failing cell
is read from it: bot/issue/notebook_note.py), and writes ``repro.ipynb`` (``--as-notebook``).

The runs use the notebook's own name for the exported script (each run's scratch copy of the
notebook's folder gets the script under ``NAME.ipynb``: Python runs a file by its content, not
its suffix), so relative paths resolve as in the notebook and nothing is written beside it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rich.markup import escape

from bot.issue.notebook_note import RECORD
from bot.output import console
from bot.scrub import scrub
from bot.store import ReproDir, write_json_atomic, write_text_atomic
from reducer.errors import ExitCode, ReprobotError
from reducer.failure.notebook import (Notebook, Place, SavedError, describe_cell, failing_place, is_notebook,
                              read_notebook)

REPRO_NOTEBOOK = "repro.ipynb"


# A notebook file is read whole before its code is measured: its saved outputs (plots as base64)
# may be many times its code, but not without bound.
OUTPUTS_FACTOR = 100


def load_notebook(path: Path, max_script_bytes: int = 0) -> Notebook | None:
    """The notebook at ``path`` exported, or None when it is not a notebook (a script: the
    caller's load_script reads it; a missing file: load_script says so)."""
    if not path.is_file():
        return None
    try:
        size = path.stat().st_size
        if path.suffix.lower() == ".ipynb" and max_script_bytes > 0 and size > OUTPUTS_FACTOR * max_script_bytes:
            raise ReprobotError(f"{path}: the notebook is {size:,} bytes, over {OUTPUTS_FACTOR} x the "
                                f"{max_script_bytes:,}-byte script cap even with its outputs "
                                "(--max-script-size raises it; or clear its outputs)", ExitCode.TOO_LARGE)
        if path.suffix.lower() != ".ipynb" and max_script_bytes > 0 and size > max_script_bytes:
            return None         # load_script's size check says so, before anything is read
        raw = path.read_bytes()
    except OSError:
        return None
    return read_notebook(path, raw) if is_notebook(path, raw) else None


def announce(nb: Notebook, from_outputs: bool) -> None:
    """Before the first run: what the export dropped and recorded, and, with ``--from-outputs``,
    the failure the notebook's saved output shows (one line and BAD_INPUT when there is none)."""
    console.print(f"notebook {escape(nb.path.name)}: {len(nb.cells)} code cells run in order as one script"
                  + (f"; {len(nb.dropped)} notebook lines not run" if nb.dropped else ""))
    if nb.requirements:
        console.print(f"  its installs (recorded, not run): pip install {escape(' '.join(nb.requirements))}")
    if not from_outputs:
        return
    saved = nb.saved_error
    if saved is None:
        raise ReprobotError(f"{nb.path}: --from-outputs: no cell has a saved error output (run the notebook and "
                            "save it, or reduce without --from-outputs)", ExitCode.BAD_INPUT)
    console.print(f"saved output: {_cell_words(nb, saved.cell, saved.execution_count)} failed with "
                  f"[bold]{escape(scrub(saved.one_line()).text[:200])}[/] (confirming it by running)")


def report(nb: Notebook, failure, repro: ReproDir, from_outputs: bool) -> None:
    """After the failure is confirmed: which cell failed, whether the saved output agrees, and
    notebook.json in the repro folder (the draft reads it)."""
    place = failing_place(nb, failure.record.frames, failure.spec.script.name)
    if place is not None:
        console.print(f"failing cell: [bold]{escape(scrub(describe_cell(nb, place)).text)}[/] "
                      "(the cell that was running when it failed)")
    data = {**nb.to_dict(), "failing_cell": _place_dict(nb, place)}
    # A private index's URL or a checkout's path in a `!pip install` line is nobody else's
    # business: stored as env.json records it (bot/env/notebook_installs.py).
    from bot.env.notebook_installs import shown_requirement
    data["requirements"] = [shown_requirement(r) for r in nb.requirements]
    for raw, shown in zip(nb.requirements, data["requirements"]):
        if raw != shown:        # the install line as recorded in "dropped" names it too
            data["dropped"] = [line.replace(raw, shown) for line in data.get("dropped") or []]
    if from_outputs and nb.saved_error is not None:
        same = confirms(nb.saved_error, failure.record)
        same_cell = place is None or place.cell == nb.saved_error.cell
        data["from_outputs"] = {"confirmed": same and same_cell, "same_failure": same, "same_cell": same_cell}
        if same and same_cell:
            console.print("[green]confirmed[/]: the run fails as the notebook's saved output says")
        else:
            saw = f"{failure.record.exc_type}: {failure.record.message}".strip()
            where = "" if same_cell else f" in cell {place.cell}" if place else ""
            console.print(f"[yellow]not confirmed[/]: the saved output says {escape(scrub(nb.saved_error.one_line()).text[:160])} "
                          f"in cell {nb.saved_error.cell}, but the run fails with {escape(scrub(saw).text[:160])}{where}; "
                          "the run's failure is the one reduced")
    write_json_atomic(repro.path / RECORD, data)


def not_reproduced(nb: Notebook, error: ReprobotError) -> ReprobotError:
    """The run shows no failure: with --from-outputs, say plainly that the saved one did not recur."""
    saved = nb.saved_error
    if saved is None or error.exit_code != ExitCode.NO_FAILURE:
        return error
    return ReprobotError(f"{error.message}; not confirmed: the notebook's saved output shows {saved.one_line()[:160]} "
                         f"in cell {saved.cell}, which this run did not reproduce", error.exit_code)


def confirms(saved: SavedError, record) -> bool:
    """The saved error and the run's are the same exception: the same class name and the same
    message, up to reprobot's message normalisation and the order of its words (a set's repr
    is ordered by the run's hash seed)."""
    from reducer.failure.normalize import normalize_message
    if saved.ename.rsplit(".", 1)[-1] != str(record.exc_type).rsplit(".", 1)[-1]:
        return False
    a, b = normalize_message(saved.evalue), normalize_message(record.message)
    return a == b or sorted(re.findall(r"\w+", a)) == sorted(re.findall(r"\w+", b))


def write_repro_notebook(repro: ReproDir) -> Path | None:
    """repro.ipynb beside repro.py: one code cell holding it, no outputs (``--as-notebook``)."""
    if not repro.repro.is_file():
        return None
    source = repro.repro.read_text(encoding="utf-8")
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "repro", "metadata": {},
                     "outputs": [], "source": source.splitlines(keepends=True)}],
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                       "language_info": {"name": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    path = repro.path / REPRO_NOTEBOOK
    write_text_atomic(path, json.dumps(nb, indent=1) + "\n")
    return path


def _cell_words(nb: Notebook, cell: int, count: int | None) -> str:
    return f"cell {cell}" + (f" (In [{count}])" if count is not None else "")


def _place_dict(nb: Notebook, place: Place | None) -> dict[str, Any] | None:
    if place is None:
        return None
    from reducer.failure.notebook import failing_line
    return {"cell": place.cell, "line": place.line, "execution_count": nb.execution_counts[place.cell - 1],
            "text": failing_line(nb, place)}
