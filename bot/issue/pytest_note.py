"""The draft's sentence about a repro reduced from a failing pytest test: which test (issue #43).

`reprobot reduce tests/test_x.py::test_name` records the test in the repro folder's
``pytest.json`` (bot/pytest_input.py); the draft reads it back here, as the notebook's sentence
reads ``notebook.json`` (bot/issue/notebook_note.py).
"""
from __future__ import annotations

import json

from bot.issue.markdown import code_span
from bot.pytest_input import RECORD
from bot.store import ReproDir


def draft_sentence(repro: ReproDir) -> str | None:
    """The draft's evidence sentence about the test, from pytest.json; None for a script."""
    path = repro.path / RECORD
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        node = str(data["node"])
        fixtures = [str(f) for f in data.get("fixtures") or []]
        param_id = data.get("param_id")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    parts = []
    if param_id:
        parts.append(f"parameter set {code_span(str(param_id)[:80])}")
    if fixtures:
        parts.append("its fixtures (" + ", ".join(code_span(f[:60]) for f in fixtures[:8])
                     + (", ..." if len(fixtures) > 8 else "") + ") written as plain code")
    how = f" ({'; '.join(parts)})" if parts else ""
    return (f"The original is a failing pytest test, {code_span(node[:200])}{how}, run as a plain script that "
            "fails the same way outside pytest.")
