"""Limits everywhere: the script's size, reprobot's own analysis under --max-time and SIGTERM,
script names that look like options, and the rlimits every run (cold or warm) gets."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reducer.errors import ExitCode
from reducer.run.limits import RunLimits, apply_limits, user_tasks
from reducer.passes.base import Pass
from reducer.run.runner import Runner, RunSpec
from reducer.search import Reducer

ROOT = Path(__file__).resolve().parents[1]


def reprobot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)}, timeout=300)


# ---- the script -----------------------------------------------------------------------------
def test_a_script_named_like_an_option_is_run_as_a_script(tmp_path) -> None:
    # `python -rf` would be the options -r -f: the interpreter's usage error, no failure found
    (tmp_path / "-rf").write_text("raise ValueError('ran as a script')\n")
    proc = reprobot("reduce", "./-rf", "--no-reduce", "--out", "store", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ran as a script" in (next((tmp_path / "store").iterdir()) / "traceback.txt").read_text()


def test_a_script_over_the_size_cap_is_refused_in_one_line(tmp_path) -> None:
    (tmp_path / "big.py").write_text("x = 1\n" * 200_000 + "raise ValueError(x)\n")     # 1.2 MB
    proc = reprobot("reduce", "big.py", "--out", "store", cwd=tmp_path)
    assert proc.returncode == ExitCode.TOO_LARGE, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "--max-script-size" in proc.stderr
    assert not (tmp_path / "store").exists()     # refused before anything ran


def test_the_statement_cap_and_the_flags_that_raise_the_caps(tmp_path) -> None:
    (tmp_path / "five.py").write_text("a = 1\nb = 2\nc = 3\nd = 4\nraise ValueError(a)\n")
    proc = reprobot("reduce", "five.py", "--max-statements", "4", "--no-reduce", "--out", "s", cwd=tmp_path)
    assert proc.returncode == ExitCode.TOO_LARGE and "5 statements" in proc.stderr, proc.stderr
    ok = reprobot("reduce", "five.py", "--max-statements", "5", "--max-script-size", "100", "--no-reduce",
                  "--out", "s", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr


# ---- reprobot's own analysis ----------------------------------------------------------------
def _spinning(marker: Path | None = None) -> tuple[Pass, dict[str, bool]]:
    """A pass that computes for a minute without asking the gate anything."""
    state = {"ran_to_end": False}

    def spin(gate) -> None:
        if marker is not None:
            marker.write_text("spinning")
        end = time.monotonic() + 60
        while time.monotonic() < end:
            sum(range(1000))
        state["ran_to_end"] = True

    return Pass("spin", spin), state


def test_max_time_stops_a_pass_that_is_still_computing() -> None:
    spin, state = _spinning()
    reducer = Reducer("a = 1\nraise ValueError(a)\n", lambda s: True, max_time=0.5, format_result=False,
                      phases=[[spin]], prelude=[])
    result = reducer.run()
    assert result.stats.status == "timeout" and not state["ran_to_end"]


def test_sigterm_stops_a_pass_that_is_still_computing(tmp_path) -> None:
    marker = tmp_path / "started"
    program = textwrap.dedent(f"""\
        import signal, sys
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        from bot.cli import _on_sigterm
        from reducer.search import Reducer
        from test_limits import _spinning
        signal.signal(signal.SIGTERM, _on_sigterm)
        spin, state = _spinning(Path({str(marker)!r}))
        result = Reducer("a = 1\\nraise ValueError(a)\\n", lambda s: True, format_result=False,
                         phases=[[spin]], prelude=[]).run()
        print(result.stats.status, state["ran_to_end"])
        """)
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(600):
        if marker.exists() or proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=50)       # well before the pass's own minute is up
    assert out.split() == ["interrupted", "False"], err


# ---- rlimits of the runs --------------------------------------------------------------------
LIMITS_PROBE = textwrap.dedent("""\
    lines = open('/proc/self/limits').read().splitlines()
    print([l for l in lines if l.startswith(('Max processes', 'Max file size'))])
    raise ValueError('probe')
    """)


def _limits_line(stdout: str, name: str) -> list[str]:
    (row,) = [r for r in eval(stdout.strip().splitlines()[-1]) if r.startswith(name)]
    return row.split()


def test_cold_and_warm_runs_get_the_limits(tmp_path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(LIMITS_PROBE)
    limits = {"NPROC": 54321, "FSIZE": 7 * 1024 * 1024}
    runner = Runner(RunSpec(script=script, timeout=60, limits=limits))
    cold = runner.run(LIMITS_PROBE)
    from reducer.run.zygote import ZygotePool
    runner.zygotes = ZygotePool(runner.python, ["json"], runner.base_environment())
    try:
        warm = runner.run(LIMITS_PROBE, warm=True)
    finally:
        runner.zygotes.stop()
    assert runner.warm_runs == 1
    for outcome in (cold, warm):
        assert _limits_line(outcome.stdout, "Max processes")[2] == "54321", outcome.stdout
        assert _limits_line(outcome.stdout, "Max file size")[3] == str(7 * 1024 * 1024), outcome.stdout


def test_the_default_limits_are_generous_and_can_be_turned_off() -> None:
    before = user_tasks()
    resolved = RunLimits().resolved()
    after = user_tasks()
    # today's count plus the headroom; the count is read twice around it because the machine's
    # other processes (a parallel job, a helper) come and go meanwhile
    assert resolved["FSIZE"] == 1 << 30
    assert min(before, after) - 64 <= resolved["NPROC"] - 4096 <= max(before, after) + 64, (before, resolved, after)
    assert RunLimits(0, 0).resolved() == {}


def test_a_run_that_writes_past_the_file_size_limit_is_an_outcome_not_a_crash(tmp_path) -> None:
    src = "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (4 << 20))\nprint('wrote it')\n"
    script = tmp_path / "writer.py"
    script.write_text(src)
    outcome = Runner(RunSpec(script=script, timeout=60, limits={"FSIZE": 1 << 20})).run(src)
    assert "wrote it" not in outcome.stdout
    assert outcome.signal == "SIGXFSZ" or any("File too large" in r.message for r in outcome.tracebacks), outcome


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv"), reason="needs root to run as nobody")
def test_the_process_limit_stops_a_fork_bomb_of_an_unprivileged_user() -> None:
    # RLIMIT_NPROC is not enforced for root: the child runs as nobody, with nobody's count + 5
    program = textwrap.dedent(f"""\
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from reducer.run.limits import RunLimits, apply_limits
        apply_limits(RunLimits(extra_processes=5, max_file_size=0).resolved())
        children = []
        try:
            for _ in range(50):
                pid = os.fork()
                if pid == 0:
                    import time; time.sleep(5); os._exit(0)
                children.append(pid)
        except BlockingIOError:
            print("EAGAIN after", len(children))
        for pid in children:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        """)
    proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", program],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.stdout.startswith("EAGAIN after"), proc.stderr
    assert int(proc.stdout.split()[-1]) <= 5
