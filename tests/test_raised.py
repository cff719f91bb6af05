"""Raised exceptions are told from printed text: real subprocesses, cold and warm.

A script can print text that looks like a traceback (a log quoting an old failure, or a forged
one). The exception recorder every run loads (reducer/run/exception_hook) says which tracebacks in
the output were raised; the printed ones never become the target ahead of a real failure, and
once the target was raised a candidate that only prints it is not a reproduction."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from reducer.failure.oracle import Oracle
from reducer.failure.original import FailureSpec, find_failure
from reducer.failure.signature import MatchOptions, distinct_failures
from reducer.failure.tracebacks import all_records
from reducer.run.raised import PRINTED, RAISED
from reducer.run.runner import Runner, RunSpec
from reducer.run.zygote import ZygotePool, warm_imports

FORGED = '''import sys
print("Traceback (most recent call last):\\n  File \\"/srv/app.py\\", line 3, in <module>\\n"
      "RuntimeError: CUDA error: device-side assert triggered", file=sys.stderr)
'''


def write(folder: Path, name: str, code: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(code))
    return path


def origins(outcome) -> dict[str, str]:
    return {r.headline: r.origin for r in all_records(outcome.tracebacks)}


@pytest.fixture(params=["cold", "warm"])
def run(request):
    """Runs a script the way the parameter says, and returns its Outcome."""
    pools = []

    def go(script: Path, env: dict | None = None, launcher: list[str] | None = None):
        source = script.read_text()
        runner = Runner(RunSpec(script=script, timeout=60, env=env or {}))
        warm = request.param == "warm" and launcher is None
        if warm:
            runner.zygotes = ZygotePool(runner.python, warm_imports(source, runner.script_dir),
                                        runner.base_environment())
            pools.append(runner.zygotes)
        outcome = runner.run(source, launcher=launcher, warm=warm)
        assert runner.warm_runs == (1 if warm else 0)
        return outcome

    yield go
    for pool in pools:
        pool.stop()


def test_a_forged_traceback_is_printed_and_the_real_one_raised(tmp_path, run):
    script = write(tmp_path, "job.py", FORGED + "raise ValueError('bad shape (3, 4)')\n")
    outcome = run(script)
    assert origins(outcome) == {"RuntimeError: CUDA error: device-side assert triggered": PRINTED,
                                "ValueError: bad shape (3, 4)": RAISED}
    # printed first, but the raised failure is the first choice
    assert outcome.tracebacks[0].exc_type == "RuntimeError"
    assert [r.exc_type for _, r in distinct_failures(outcome)] == ["ValueError", "RuntimeError"]


def test_logged_thread_child_and_chained_exceptions_count_as_raised(tmp_path, run):
    script = write(tmp_path, "worker.py", """
        import logging, threading, multiprocessing as mp

        def child():
            raise OSError("disk quota exceeded")

        def in_thread():
            {}["missing"]

        if __name__ == "__main__":
            logging.basicConfig()
            try:
                int("x")
            except ValueError:
                logging.getLogger("w").exception("job failed")
            t = threading.Thread(target=in_thread)
            t.start(); t.join()
            p = mp.get_context("spawn").Process(target=child)
            p.start(); p.join()
            try:
                1 / 0
            except ZeroDivisionError as exc:
                raise RuntimeError("step 3 failed\\nsee above") from exc
        """)
    outcome = run(script)
    assert origins(outcome) == {
        "ValueError: invalid literal for int() with base 10: 'x'": RAISED,
        "KeyError: 'missing'": RAISED,
        "OSError: disk quota exceeded": RAISED,
        "ZeroDivisionError: division by zero": RAISED,
        "RuntimeError: step 3 failed": RAISED,
    }
    assert outcome.returncode == 1


def test_a_script_that_prints_its_own_traceback_still_counts_as_raised(tmp_path, run):
    script = write(tmp_path, "loop.py", """
        import sys, traceback
        try:
            open("/nonexistent/config.json")
        except OSError:
            sys.stderr.write(traceback.format_exc())
        """)
    outcome = run(script)
    assert origins(outcome) == {
        "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/config.json'": RAISED}
    assert outcome.returncode == 0


def test_a_rich_traceback_handler_does_not_hide_the_failure(tmp_path, run):
    # accelerate before 0.22 installs rich's handler whenever rich is importable (peft-860): its
    # boxed traceback is no traceback to a parser, so the run keeps Python's own
    pytest.importorskip("rich")
    script = write(tmp_path, "fancy.py", """
        import json
        from rich.traceback import install

        install(show_locals=False)
        json.loads("{broken")
        """)
    outcome = run(script)
    assert [r.exc_type for _, r in distinct_failures(outcome)] == ["json.decoder.JSONDecodeError"]
    assert "\u2570" not in outcome.stderr and "Traceback (most recent call last)" in outcome.stderr


def test_without_the_recorder_nothing_is_marked(tmp_path, run):
    # `python -S` skips site (and so the recorder): nothing is known, nothing is demoted.
    script = write(tmp_path, "job.py", FORGED + "raise ValueError('x')\n")
    outcome = run(script, launcher=["-S"])
    assert set(origins(outcome).values()) == {""}


def test_a_users_sitecustomize_still_runs(tmp_path, run):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import builtins\nbuiltins.CLUSTER = 'eu-west'\n")
    script = write(tmp_path, "job.py", "raise LookupError(CLUSTER)\n")
    outcome = run(script, env={"PYTHONPATH": str(site)})
    assert origins(outcome) == {"LookupError: eu-west": RAISED}


def test_the_target_is_the_raised_failure_and_printed_copies_do_not_reproduce(tmp_path):
    script = write(tmp_path, "job.py", FORGED + textwrap.dedent("""
        def load(n):
            raise ValueError(f"bad shape ({n}, 4)")
        load(3)
        """))
    failure = find_failure(FailureSpec(script=script, source=script.read_text(), python="python",
                                       runs=2, timeout=60))
    assert failure.record.exc_type == "ValueError" and failure.raised
    oracle = Oracle(failure.runner, failure.signature, failure.spec.options, timeout=30,
                    as_itself=failure.as_itself, raised=failure.raised)
    printed_copy = ("import sys\nprint('Traceback (most recent call last):\\n  File \"job.py\", line 4, "
                    "in load\\nValueError: bad shape (3, 4)', file=sys.stderr)\n")
    still_raises = "def load(n):\n    raise ValueError(f'bad shape ({n}, 4)')\nload(3)\n"
    assert not oracle.test(printed_copy).interesting
    assert oracle.test(still_raises).interesting
    # The same printed copy passes where nothing says the original raised it (a pasted trace).
    lenient = Oracle(failure.runner, failure.signature, MatchOptions(frames=0), timeout=30)
    assert lenient.test(printed_copy).interesting
