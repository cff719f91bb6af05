"""One run recipe per repro folder (bot/run_recipe.py, issue #40): every step that runs a repro
gets its runner from the recipe, and nothing else in bot/ starts the user's interpreter.

The rules read the code: a runner built anywhere but the recipe, or a process started by a module
not listed here with the reason it starts one, fails a test (each rule has a test showing it can)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

from bot.run_recipe import RunRecipe

ROOT = Path(__file__).resolve().parent.parent

# Where bot/ may build the engine's runner, and why.
BUILDS_RUNNERS = {
    "bot/run_recipe.py": "the recipe itself",
    "bot/env/lockfile.py": "a bare script with no folder yet (find_imported_modules), as the reducer runs it",
}
# The modules of bot/ that start processes, and what they start: none of them the repro.
STARTS_PROCESSES = {
    "bot/env/lockfile.py": "pip-compile",
    "bot/env/probe.py": "the environment probe, sysctl, nvidia-smi",
    "bot/rerun/environments.py": "pip/uv installs and the versions probe of a release environment",
    "bot/rerun/releases.py": "pip index queries",
    "bot/rerun/requirement_choice.py": "`pip config list`, for the index the user's pip is configured with",
    "bot/action/jail.py": "the sandbox's steps (reprobot's own commands)",
    "bot/action/reproduce.py": "`reprobot reduce` on the posted script, inside the sandbox",
    "bot/action/sandbox.py": "the sandbox launcher",
}
_PROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output", "system", "popen", "spawnv", "execv",
                  "execvp", "create_subprocess_exec", "create_subprocess_shell"}


def _called(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _module(node: ast.Call) -> str:
    f = node.func
    return f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""


def runner_builds(source: str) -> list[int]:
    return [n.lineno for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and _called(n) in ("Runner", "RunSpec")]


def process_starts(source: str) -> list[int]:
    return [n.lineno for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and _called(n) in _PROCESS_CALLS
            and _module(n) in ("subprocess", "os", "asyncio")]


def _offenders(rule, allowed: dict[str, str]) -> dict[str, list[int]]:
    out = {}
    for p in sorted((ROOT / "bot").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel not in allowed and (lines := rule(p.read_text(encoding="utf-8"))):
            out[rel] = lines
    return out


def test_only_the_recipe_builds_a_runner() -> None:
    assert _offenders(runner_builds, BUILDS_RUNNERS) == {}


def test_no_other_module_starts_a_process() -> None:
    assert _offenders(process_starts, STARTS_PROCESSES) == {}


def test_the_rules_see_their_breaches() -> None:
    step = ("import subprocess\nfrom reducer.run.runner import Runner, RunSpec\n"
            "subprocess.run(['python', 'repro.py'])\nRunner(RunSpec(script=p))\n")
    assert process_starts(step) == [3] and runner_builds(step) == [4, 4]
    assert process_starts("import os\nos.system('python repro.py')\n") == [2]
    assert process_starts("proc.run()\nrecipe.runner(home, src, py)\n") == []


def test_the_recipe_reads_a_folder_written_before_it_had_an_environment() -> None:
    old = {"script": "train.py", "args": ["--lr", "3"], "runs": [{"wall_time": 20.0}],
           "launch": {"tokens": ["torchrun", "--nproc_per_node", "2", "train.py", "--lr", "3"],
                      "run": ["torchrun", "--nproc_per_node", "2", "train.py", "--lr", "3"]}}
    recipe = RunRecipe.from_signature(json.loads(json.dumps(old)))
    assert recipe.env == {} and recipe.default_timeout() == 110.0
    assert recipe.command("repro.py") == "torchrun --nproc_per_node 2 repro.py --lr 3"
    plain = RunRecipe.from_signature({"script": "-rf.py", "args": ["a b"]})
    assert plain.command() == "python ./-rf.py 'a b'" and plain.default_timeout() == 60.0
