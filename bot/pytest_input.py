"""`reprobot reduce tests/test_x.py::test_name` (also ``-k EXPR``, a parametrized id, a test file,
and the launch line ``-- pytest ...`` / ``-- python -m pytest ...``): the pytest side of the
command and of the draft (issue #43).

pytest runs the selection once in the user's interpreter (reducer/run/pytest_run.py) and says
which tests failed and how; the first failing one (``--pick N``: the Nth) is written as a plain
script (reducer/failure/pytest_node.py), and that script is reduced exactly as any other, under the test
module's name in a scratch copy of its folder. The script's failure must be the test's: the
signature pytest's run shows (its own frames that only call the test left out) and the one the
script's runs show are compared before anything is stored. ``pytest.json`` in the repro folder
records the test (the draft's sentence is read from it: bot/issue/pytest_note.py).
"""
from __future__ import annotations

import ast
import fnmatch
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape

from bot.output import console
from bot.scrub import scrub
from bot.store import ReproDir, write_json_atomic
from reducer.errors import ExitCode, ReprobotError
from reducer.failure.outcome import TracebackRecord
from reducer.failure.pytest_node import NodeScript, build_script
from reducer.failure.signature import MatchOptions, Signature, signature_of

RECORD = "pytest.json"
# pytest's default python_files: a file named so, with tests in it, is a test module.
TEST_FILES = ("test_*.py", "*_test.py")


@dataclass
class NodeRequest:
    """Which tests the user named: pytest's own arguments."""

    args: list[str]
    shown: str                      # as the user wrote it, for messages


@dataclass
class PytestTest:
    """The failing test chosen, written as a script, with pytest's view of its failure."""

    request: NodeRequest
    failure: dict                   # as reducer/run/pytest_probe.py recorded it
    script: NodeScript
    record: TracebackRecord | None
    selected: int
    failing_seen: list[str]

    @property
    def path(self) -> Path:
        return self.script.path

    def signature(self, options: MatchOptions) -> Signature | None:
        return signature_of(self.record, options) if self.record is not None else None


def is_pytest_line(tokens: list[str]) -> bool:
    """``pytest ...``, ``py.test ...``, ``python -m pytest ...`` (any python)."""
    if not tokens:
        return False
    exe = os.path.basename(tokens[0])
    return exe in ("pytest", "py.test") or (exe.startswith("python") and tokens[1:3] == ["-m", "pytest"])


def requested_node(script: Path | None, keyword: str | None, passthrough: list[str]) -> NodeRequest | None:
    """The tests a `reduce` command names, or None when it names a script or a notebook. One line
    and a non-zero exit for a node id whose file is missing or not Python."""
    if script is None:
        if not is_pytest_line(passthrough):
            if keyword is not None:
                raise ReprobotError("-k: give the test file too (`reprobot reduce tests/test_x.py -k EXPR`)",
                                    ExitCode.USAGE)
            return None
        args = passthrough[1:] if os.path.basename(passthrough[0]) in ("pytest", "py.test") else passthrough[3:]
        if keyword is not None:
            args = [*args, "-k", keyword]
        return NodeRequest(args, shlex.join(passthrough))
    text = str(script)
    node = "::" in text
    path = Path(text.split("::", 1)[0])
    if not node and keyword is None and not looks_like_test_module(path):
        return None
    if not path.exists():
        raise ReprobotError(f"{path}: no such file", ExitCode.FILE_MISSING)
    if node and (not path.is_file() or path.suffix != ".py"):
        raise ReprobotError(f"{text}: a test node names a Python test file (tests/test_x.py::test_name), "
                            f"and {path} is not one", ExitCode.NOT_PYTHON)
    if passthrough:
        raise ReprobotError(f"{text}: a test takes no script arguments; give pytest's own options in a launch "
                            f"line: `reprobot reduce -- pytest {text} ...`", ExitCode.USAGE)
    args = [text] + (["-k", keyword] if keyword is not None else [])
    return NodeRequest(args, shlex.join(args))


def looks_like_test_module(path: Path) -> bool:
    """A file pytest would collect tests from: named test_*.py or *_test.py, with a test function
    or class at its top level. Run as a script, such a file only defines its tests."""
    if not path.is_file() or not any(fnmatch.fnmatch(path.name, p) for p in TEST_FILES):
        return False
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError, RecursionError, MemoryError):
        return False
    return any((isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test"))
               or (isinstance(n, ast.ClassDef) and n.name.startswith("Test")) for n in tree.body)


def load_test(request: NodeRequest, python: str, timeout: float, pick: int, cwd: Path | None = None) -> PytestTest:
    """Run the selection under pytest, choose the failing test (the ``pick``-th), write it as a
    script; one line and a non-zero exit when nothing fails or it cannot be written."""
    from reducer.failure.tracebacks import parse_tracebacks
    from reducer.run.pytest_run import run_pytest
    console.print(f"running [bold]pytest {escape(scrub(shlex.join(request.args)).text)}[/] once to find the "
                  "failing test", highlight=False)
    run = run_pytest(request.args, python, cwd or Path.cwd(), timeout, maxfail=pick)
    if not run.failures:
        if run.errors:
            e = run.errors[0]
            raise ReprobotError(f"pytest could not collect {e['nodeid'] or request.shown}: {e['exc_type']}: "
                                f"{str(e['message']).strip().splitlines()[0][:200] if e['message'] else ''}; "
                                "nothing ran (a file that fails on import reduces as a script: "
                                "`reprobot reduce -- python FILE`)", ExitCode.BAD_INPUT)
        if not run.selected:
            last = next((ln for ln in reversed(run.output.strip().splitlines()) if ln.strip()), "")
            if run.exitstatus == 4:
                raise ReprobotError(f"pytest {request.shown}: {last.strip()[:200]}", ExitCode.FILE_MISSING)
            raise ReprobotError(f"pytest {request.shown}: no test selected", ExitCode.FILE_MISSING)
        skipped = run.outcomes.get("skipped", 0)
        raise ReprobotError(f"pytest {request.shown}: {len(run.selected)} test{'s' * (len(run.selected) != 1)} "
                            f"selected, none failed" + (f" ({skipped} skipped)" if skipped else ""),
                            ExitCode.NO_FAILURE)
    if len(run.failures) < pick:
        raise ReprobotError(f"--pick {pick}: only {len(run.failures)} of the {len(run.selected)} selected tests "
                            "failed", ExitCode.USAGE)
    chosen = run.failures[pick - 1]
    seen = [f["nodeid"] for f in run.failures]
    if len(run.selected) > 1:
        nth = "the first failing one" if pick == 1 else f"failing test {pick}"
        console.print(f"{len(run.selected)} tests selected; {nth}: [bold]{escape(scrub(chosen['nodeid']).text)}[/] "
                      f"(--pick N takes the Nth failing test)", highlight=False)
    script = build_script(chosen)
    records = parse_tracebacks(str(chosen.get("traceback") or ""))
    test = PytestTest(request, chosen, script, records[-1] if records else None, len(run.selected), seen)
    announce(test)
    return test


def announce(test: PytestTest) -> None:
    s = test.script
    said = f"test {escape(scrub(s.nodeid).text)} failed with " \
           f"[bold]{escape(scrub(_one_line(test.failure)).text[:200])}[/]"
    if test.failure.get("when") == "setup":
        said += " (in a fixture)"
    console.print(said, highlight=False)
    parts = []
    if s.fixtures:
        parts.append("fixtures as plain code: " + ", ".join(s.fixtures))
    if s.params:
        parts.append("parameters: " + ", ".join(f"{k} = {v}" for k, v in s.params.items()))
    if s.not_inlined:
        parts.append("left out (a plugin's autouse fixture): " + ", ".join(s.not_inlined))
    console.print(f"  written as a plain script ({escape(scrub('; '.join(parts) or 'no fixtures').text[:400])})",
                  highlight=False)


def _one_line(failure: dict) -> str:
    message = str(failure.get("message") or "").strip().splitlines()
    return f"{failure.get('exc_type')}: {message[0]}" if message else str(failure.get("exc_type"))


def confirm(test: PytestTest, failure) -> None:
    """The script fails as the test did under pytest (the same signature), or one line saying
    how it fails instead (exit NO_FAILURE: the test's failure is not reproduced outside pytest)."""
    wanted = test.signature(failure.spec.options)
    if wanted is None or wanted == failure.signature:
        return
    raise ReprobotError(f"{test.script.nodeid}: as a plain script it fails with {failure.signature.one_line()[:200]}, "
                        f"not with the test's {wanted.one_line()[:200]}; the test's failure needs something of "
                        "pytest's that the script does not have (a plugin, an ini option, a fixture's teardown)",
                        ExitCode.NO_FAILURE)


def not_reproduced(test: PytestTest, error: ReprobotError) -> ReprobotError:
    """The script shows no failure: say that the test fails under pytest only."""
    if error.exit_code != ExitCode.NO_FAILURE:
        return error
    return ReprobotError(f"{test.script.nodeid}: fails under pytest ({_one_line(test.failure)[:160]}) but not as a "
                         f"plain script ({error.message[:160]}); the failure needs something of pytest's (a plugin, "
                         "an ini option, a fixture's teardown)", error.exit_code)


def report(test: PytestTest, failure, repro: ReproDir) -> None:
    """After the failure is confirmed: which test failed, and pytest.json (the draft reads it)."""
    console.print(f"failing test: [bold]{escape(scrub(test.script.nodeid).text)}[/] (the script fails as the test "
                  "does under pytest)", highlight=False)
    sig = test.signature(failure.spec.options)
    data: dict[str, Any] = {**test.script.to_dict(), "selected": test.selected, "failing_seen": test.failing_seen,
                            "when": test.failure.get("when"),
                            "pytest_signature": sig.to_dict() if sig is not None else None,
                            "same_signature": sig is None or sig == failure.signature}
    write_json_atomic(repro.path / RECORD, data)
