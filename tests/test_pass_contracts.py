"""Every pass states what it removes and what it must never change (reducer/passes/__init__.py):
the contract a reader checks a pass's candidates against, in the pass's own docstring."""
from __future__ import annotations

import inspect

from reducer.passes import FINE, PRELUDE, STRUCTURE
from reducer.passes.base import Pass


def _missing(passes: list[Pass]) -> list[str]:
    out = []
    for p in passes:
        doc = inspect.getdoc(p.fn) or ""
        out += [f"{p.name}: no {word!r}" for word in ("Removes:", "Never changes:") if word not in doc]
    return out


def test_every_pass_says_what_it_removes_and_what_it_never_changes() -> None:
    assert _missing(PRELUDE + STRUCTURE + FINE) == []


def test_a_pass_without_its_contract_is_named() -> None:
    def undocumented(gate) -> None:
        """Does something."""

    assert _missing([Pass("undocumented", undocumented)]) == ["undocumented: no 'Removes:'",
                                                              "undocumented: no 'Never changes:'"]
