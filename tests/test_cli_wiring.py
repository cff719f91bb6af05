"""One way to say each thing (issue #33): one Console, --quiet and --json under every command,
--repo KEY everywhere (owner/name mapped), distinct names for the issue index and the package
index. Real parsers, real commands on a pasted traceback and a real SQLite index."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from bot.cli import build_parser, main
from reducer.errors import ExitCode
from tests.test_route import tb

ROOT = Path(__file__).resolve().parents[1]
PASTE = tb(["peft/peft_model.py:from_pretrained", "peft/utils/save_and_load.py:load_peft_weights"],
           "KeyError: 'base_model.model.lm_head.weight'", call="PeftModel.from_pretrained(base, path)")


def _console_constructions(path: Path) -> list[int]:
    """Lines where ``path`` calls rich's ``Console(...)`` (by any import spelling)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name == "Console":
                lines.append(node.lineno)
    return lines


def test_only_bot_output_creates_a_console() -> None:
    made = {str(p.relative_to(ROOT)): lines for p in sorted((ROOT / "bot").rglob("*.py"))
            if (lines := _console_constructions(p))}
    assert set(made) == {"bot/output.py"}, made
    # the check sees a construction where there is one
    assert _console_constructions(ROOT / "bot" / "output.py")


def _subparsers(parser) -> dict:
    return next(a for a in parser._actions if a.choices and "route" in a.choices).choices


def _leaves(name: str, parser) -> list[tuple[str, object]]:
    subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    if not subs:
        return [(name, parser)]
    return [leaf for s in subs for n, q in s.choices.items() for leaf in _leaves(f"{name} {n}", q)]


def test_every_command_takes_quiet() -> None:
    leaves = [leaf for n, p in _subparsers(build_parser()).items() for leaf in _leaves(n, p)]
    assert len(leaves) >= 14  # reduce ... watch, index's four actions, action's three
    missing = [n for n, p in leaves if "--quiet" not in p._option_string_actions]
    assert missing == []


def test_quiet_silences_commands_that_had_their_own_console(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    paste = tmp_path / "tb.txt"
    paste.write_text(PASTE, encoding="utf-8")
    db = str(tmp_path / "index.sqlite3")
    # Loud first: each prints its report (so the quiet runs below are quiet, not broken).
    assert main(["route", "--traceback", str(paste), "--no-issue-index"]) == 0
    assert "target:" in capsys.readouterr().out
    assert main(["index", "seed", "--db", db]) == 0
    assert "known issue(s) bundled with reprobot" in capsys.readouterr().out
    for argv in (["route", "--traceback", str(paste), "--no-issue-index", "--quiet"],
                 ["index", "seed", "--db", db, "--quiet"],
                 ["index", "status", "--db", db, "--quiet"],
                 ["dedup", "--traceback", str(paste), "--db", db, "--no-search", "--quiet"]):
        assert main(argv) == 0, argv
        out, err = capsys.readouterr()
        assert out == "" and err == "", (argv, out, err)
    # The console is itself again afterwards.
    assert main(["index", "status", "--db", db]) == 0
    assert "issue index" in capsys.readouterr().out


def test_json_is_the_only_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paste = tmp_path / "tb.txt"
    paste.write_text(PASTE, encoding="utf-8")
    db = str(tmp_path / "index.sqlite3")
    assert main(["index", "seed", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["added"] > 0
    # dedup used to print its sync notes and progress through its own console even with --json
    assert main(["dedup", "--traceback", str(paste), "--db", db, "--no-search", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["indexed_issues"] > 0


def test_repo_takes_a_key_or_owner_name_under_every_command() -> None:
    parser = build_parser()
    assert parser.parse_args(["dedup", "--repo", "huggingface/peft"]).repo == "peft"
    assert parser.parse_args(["dedup", "--repo", "peft"]).repo == "peft"
    assert parser.parse_args(["index", "sync", "--repo", "HuggingFace/PEFT", "--repo", "trl"]).repo == ["peft", "trl"]
    assert parser.parse_args(["index", "import", "f.json", "--repo", "pytorch/pytorch"]).repo == "pytorch"
    assert parser.parse_args(["draft", "d", "--repo", "bitsandbytes-foundation/bitsandbytes"]).repo == ["bitsandbytes"]
    assert parser.parse_args(["file", "d", "--dry-run", "--repo", "huggingface/accelerate"]).repo == "accelerate"


@pytest.mark.parametrize("argv", [["dedup", "--traceback", "-", "--repo", "huggingface/nope"],
                                  ["index", "sync", "--repo", "nope"],
                                  ["draft", "x", "--repo", "huggingface"]])
def test_an_unknown_repo_is_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == ExitCode.USAGE
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert "unknown repository" in err and "peft" in err


def test_the_issue_index_flag_has_its_own_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paste = tmp_path / "tb.txt"
    paste.write_text(PASTE, encoding="utf-8")
    assert main(["route", "--traceback", str(paste), "--no-issue-index", "--json"]) == 0
    new = capsys.readouterr()
    assert new.err == ""
    # The old spelling still works, says the new one in one line, and routes the same way.
    assert main(["route", "--traceback", str(paste), "--no-index", "--json"]) == 0
    old = capsys.readouterr()
    assert json.loads(old.out) == json.loads(new.out)
    assert old.err.strip() == "reprobot: --no-index is now --no-issue-index (the old spelling will go away)"
    # It is hidden from help; versions' --no-index (pip's package index) is untouched.
    sub = _subparsers(build_parser())
    assert "--no-index" not in sub["route"].format_help()
    assert "--no-index" in sub["versions"].format_help() and "--no-issue-index" not in sub["versions"].format_help()
