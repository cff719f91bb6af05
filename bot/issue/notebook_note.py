"""The draft's sentence about a repro reduced from a Jupyter notebook: which cell failed (issue #43).

`reprobot reduce nb.ipynb` records the notebook in the repro folder's ``notebook.json``
(bot/notebook.py); the draft reads it back here, as it reads every other record of the folder.
"""
from __future__ import annotations

import json

from bot.issue.markdown import code_span
from bot.store import ReproDir

RECORD = "notebook.json"


def draft_sentence(repro: ReproDir) -> str | None:
    """The draft's evidence sentence about the notebook, from notebook.json; None for a script."""
    path = repro.path / RECORD
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        cell = data.get("failing_cell") or {}
        name, cells = str(data["notebook"]), int(data["code_cells"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    where = ""
    if isinstance(cell.get("cell"), int):
        count = cell.get("execution_count")
        where = (f"; it failed in cell {cell['cell']}" + (f" (In [{count}])" if isinstance(count, int) else "")
                 + (f", line {cell['line']}" if isinstance(cell.get("line"), int) else "")
                 + (f": {code_span(str(cell['text'])[:120])}" if cell.get("text") else ""))
    return (f"The original is a Jupyter notebook ({code_span(name)}, {cells} code cells run in "
            f"order as one script{where}).")
