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
    sentence = (f"The original is a Jupyter notebook ({code_span(name)}, {cells} code cells run in "
                f"order as one script{where}).")
    return sentence + _versions(repro)


def _versions(repro: ReproDir) -> str:
    """What the notebook installs that the run did not have (env.json's ``notebook_installs``):
    the repro was verified on the run's versions, and a maintainer must not read it as the
    notebook's."""
    from bot.env.notebook_installs import mismatches
    try:
        env = json.loads(repro.env_json.read_text(encoding="utf-8")) if repro.env_json.is_file() else None
    except (OSError, ValueError):
        return ""
    missed = mismatches(env if isinstance(env, dict) else None)
    if not missed:
        return ""
    return (" It was verified on the run's versions (System Info), not the notebook's: the notebook installs "
            + "; ".join(code_span(m.split(" (", 1)[0]) + " (" + m.split(" (", 1)[1] if " (" in m else code_span(m)
                        for m in missed[:8]) + ".")
