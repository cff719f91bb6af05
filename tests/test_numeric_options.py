"""Every numeric option is checked before anything runs (issue #40): ``--jobs 0``, ``--max-time -5``
or ``--runs 0`` is a one-line usage error (exit 2), never an internal traceback, a run that stops
at once, or a silent exit 0. The rule is checked on the parser itself, so an option added later
with a bare ``type=int`` fails here."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bot.cli import build_parser, main
from reducer.errors import ExitCode, ReprobotError


def _numeric_actions(parser: argparse.ArgumentParser) -> list[tuple[list[str], argparse.Action]]:
    """(the subcommand path, the action) for every option whose type is a number parser."""
    out: list[tuple[list[str], argparse.Action]] = []

    def walk(p: argparse.ArgumentParser, path: list[str]) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, path + [name])
            elif a.option_strings and a.type is not None and getattr(a.type, "__qualname__", "").split(".")[0] in (
                    "int", "float", "whole", "seconds"):
                out.append((path, a))
    walk(parser, [])
    return out


NUMERIC = _numeric_actions(build_parser())


def test_no_numeric_option_takes_a_bare_int_or_float() -> None:
    bare = [(" ".join(path), a.option_strings[0]) for path, a in NUMERIC if a.type in (int, float)]
    assert bare == []
    assert len(NUMERIC) >= 20      # reduce's sixteen, contrast, versions, env, dedup, index


def test_the_rule_sees_a_bare_int_in_a_subcommand() -> None:
    # the check above can fail: an option added with type=int under a subcommand is found
    parser = argparse.ArgumentParser()
    parser.add_subparsers().add_parser("sync").add_argument("--retries", type=int)
    assert [(p, a.type) for p, a in _numeric_actions(parser)] == [(["sync"], int)]


@pytest.mark.parametrize("path,action", NUMERIC, ids=[" ".join(p) + " " + a.option_strings[0] for p, a in NUMERIC])
def test_a_bad_number_is_one_line_and_nothing_runs(path: list[str], action: argparse.Action, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "boom.py"
    script.write_text("raise ValueError('boom')\n")
    positional = {"reduce": [str(script)], "versions": [str(tmp_path)], "contrast": [str(tmp_path)],
                  "dedup": ["--traceback", str(script)]}.get(path[0], [])
    flag = action.option_strings[0]
    for bad in ("-5", "nan", "many") if action.type.__qualname__.startswith("seconds") else ("-1", "1.5", "many"):
        before = sorted(p.name for p in tmp_path.iterdir())
        assert main([*path, *positional, flag, bad]) == ExitCode.USAGE
        out, err = capsys.readouterr()
        assert len(err.strip().splitlines()) == 1 and flag in err and repr(bad) in err, err
        assert sorted(p.name for p in tmp_path.iterdir()) == before      # no repros folder, no index


def test_the_lowest_allowed_values_parse() -> None:
    args = build_parser().parse_args(["reduce", "x.py", "--jobs", "1", "--runs", "1", "--max-time", "0.5",
                                      "--max-statements", "0", "--frames", "0"])
    assert (args.jobs, args.runs, args.max_time, args.max_statements, args.frames) == (1, 1, 0.5, 0, 0)
    with pytest.raises(ReprobotError):
        build_parser().parse_args(["reduce", "x.py", "--jobs", "0"])
