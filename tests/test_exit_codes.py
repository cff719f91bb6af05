"""Exit statuses are one table (reducer/errors.py): every error names a status from it, every
status has a meaning, `reprobot --help` prints it and the README repeats it row for row."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from bot.cli import main
from reducer.errors import MEANINGS, ExitCode

ROOT = Path(__file__).resolve().parent.parent


def _statuses() -> dict[str, int]:
    return {k: v for k, v in vars(ExitCode).items() if k.isupper()}


def _raised_without_a_status(source: str) -> list[int]:
    """Lines of ``ReprobotError(...)`` calls whose status is not ``ExitCode.NAME`` (a variable
    holding one is fine only where it came from a ``ReprobotError``'s own field: listed below)."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "ReprobotError"):
            continue
        code = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "exit_code"), None)
        named = isinstance(code, ast.Attribute) and isinstance(code.value, ast.Name) and code.value.id == "ExitCode"
        passed_on = isinstance(code, ast.Attribute) and code.attr == "exit_code"
        if not (named or passed_on):
            bad.append(node.lineno)
    return bad


def test_every_status_has_one_meaning_and_one_name() -> None:
    statuses = _statuses()
    assert set(statuses.values()) == set(MEANINGS), "a status without a meaning, or a meaning without a status"
    assert len(set(statuses.values())) == len(statuses), "two names for one status"


def test_every_error_raised_names_a_status() -> None:
    offenders = {str(p.relative_to(ROOT)): lines
                 for root in ("bot", "reducer") for p in sorted((ROOT / root).rglob("*.py"))
                 if (lines := _raised_without_a_status(p.read_text(encoding="utf-8")))}
    assert offenders == {}


def test_the_rule_sees_an_error_with_no_status() -> None:
    assert _raised_without_a_status("raise ReprobotError('x')\nraise ReprobotError('y', 3)\n") == [1, 2]
    assert _raised_without_a_status("raise ReprobotError('x', ExitCode.USAGE)\n"
                                    "raise ReprobotError(p.refusal, p.exit_code)\n") == []


def test_help_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for code, meaning in MEANINGS.items():
        assert f"{code} {meaning}" in text


def test_the_readme_repeats_the_table_row_for_row() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d+) \| ([^|]+?) \|$", readme, flags=re.M))
    assert {int(c) for c in rows} == set(MEANINGS)
    for code, meaning in MEANINGS.items():
        assert rows[str(code)].startswith(meaning), code
