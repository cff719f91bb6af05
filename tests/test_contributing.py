"""CONTRIBUTING.md's recipes, followed: each test does what its recipe says, with a throwaway
part, and checks the rest of reprobot picks it up with no other change (the throwaway target's
test is tests/test_targets.py). If a recipe goes stale, its test fails."""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

import bot.commands
from bot import cli
from bot.targets import REPO_KEYS
from reducer.errors import ExitCode
from reducer.passes import STRUCTURE
from reducer.passes.base import Gate, Pass
from reducer.search.driver import Reducer
from tests.reducer_support import raises

ROOT = Path(__file__).resolve().parents[1]


# ---- Add a pass -----------------------------------------------------------------------------
def drop_marked(gate: Gate) -> None:
    """The throwaway pass: one candidate, every line marked ``# drop-me`` deleted. It only
    proposes; the gate decides (size order, seen-set, a real run through the oracle)."""
    kept = [line for line in gate.best.splitlines(keepends=True) if not line.rstrip().endswith("# drop-me")]
    if len(kept) < len(gate.best.splitlines()):
        gate.consider("".join(kept))


SCRIPT = textwrap.dedent('''\
    import json
    noise = [n * n for n in range(50)]  # drop-me
    more = {"a": noise, "b": len(noise)}  # drop-me
    json.loads('{"lr": 0.1,}')
''')


def test_add_a_pass() -> None:
    # Step 2 of the recipe: a Pass in STRUCTURE (first here, so no other pass takes its lines).
    STRUCTURE.insert(0, Pass("drop_marked", drop_marked))
    try:
        oracle = raises(json.JSONDecodeError, "Expecting property name")
        assert oracle(SCRIPT)
        reducer = Reducer(SCRIPT, oracle, prelude=[], format_result=False)
        result = reducer.run()
    finally:
        STRUCTURE.pop(0)
    stats = reducer.stats.passes["drop_marked"]
    assert stats.proposed >= 1 and stats.accepted == 1, stats
    assert "drop-me" not in result.best_source and "json.loads" in result.best_source
    assert oracle(result.best_source)
    # ...and it is gone with the test: the pass list is what it was.
    assert "drop_marked" not in [p.name for p in STRUCTURE]


# ---- Add a command --------------------------------------------------------------------------
COMMAND = textwrap.dedent('''\
    """`reprobot hello`: the throwaway command of CONTRIBUTING.md's recipe."""
    from __future__ import annotations

    import argparse
    import json

    from bot.commands._options import add_json, add_repo
    from bot.output import console
    from reducer.errors import ExitCode, ReprobotError


    def register(sub: argparse._SubParsersAction) -> None:
        p = sub.add_parser("hello", help="say which repository a key names")
        add_repo(p, "the repository", required=True)
        add_json(p, "the answer")
        p.add_argument("--fail", action="store_true", help="stop with a usage error")
        p.set_defaults(func=run)


    def run(args: argparse.Namespace) -> int:
        from bot.targets import get_target
        if args.fail:
            raise ReprobotError("hello: asked to fail", ExitCode.USAGE)
        repo = get_target(args.repo).repo
        if args.json:
            print(json.dumps({"key": args.repo, "repo": repo}))
            return 0
        console.print(f"hello [bold]{args.repo}[/]: {repo}")
        return 0
''')


@pytest.fixture
def hello(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Steps 1 and 2 of the recipe: a module in bot.commands, its name in NAMES. The module is
    a real file on the package's path, imported by bot/cli.py like every other command."""
    (tmp_path / "hello.py").write_text(COMMAND, encoding="utf-8")
    monkeypatch.setattr(bot.commands, "__path__", [*bot.commands.__path__, str(tmp_path)])
    monkeypatch.setattr(cli, "NAMES", [*cli.NAMES, "hello"])
    yield tmp_path / "hello.py"
    sys.modules.pop("bot.commands.hello", None)


def test_add_a_command(hello: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["hello", "--repo", "peft"]) == 0
    assert capsys.readouterr().out == "hello peft: huggingface/peft\n"
    # What the CLI gives every command, with nothing in the module for it:
    assert cli.main(["hello", "--repo", "huggingface/peft", "--json"]) == 0      # owner/name mapped
    assert json.loads(capsys.readouterr().out) == {"key": "peft", "repo": "huggingface/peft"}
    assert cli.main(["hello", "--repo", "trl", "--quiet"]) == 0                   # --quiet
    assert capsys.readouterr() == ("", "")
    assert cli.main(["hello", "--repo", "nope"]) == ExitCode.USAGE              # one-line errors
    assert cli.main(["hello", "--repo", "peft", "--fail"]) == ExitCode.USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "reprobot: unknown repository 'nope' (expected one of: " + ", ".join(REPO_KEYS) + ")",
        "reprobot: hello: asked to fail"]
    # It is listed, in NAMES order, with the rest.
    assert "hello" in cli.build_parser().format_help()
    # The module follows the rules the wiring test checks for every command (no Console of its own).
    from tests.test_cli_wiring import _console_constructions
    assert _console_constructions(hello) == []


def test_the_throwaway_command_is_gone_after_its_test() -> None:
    assert "hello" not in cli.NAMES and "bot.commands.hello" not in sys.modules
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["hello", "--repo", "peft"])
