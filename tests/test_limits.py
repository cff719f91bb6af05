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
from reducer.passes.base import Pass
from reducer.run.limits import RunLimits, apply_limits, user_tasks
from reducer.run.runner import Runner, RunSpec
from reducer.search.driver import Reducer

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
        from reducer.search.driver import Reducer
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


def test_max_time_bounds_the_whole_command_pinning_included(tmp_path) -> None:
    # issue #40: a hang verified at about 20 s then sat in environment pinning, which ran the
    # hanging repro with a fixed 600-s timeout; now the repro's run gets one candidate's timeout
    # and the whole step what is left of --max-time plus PIN_GRACE
    from bot.env.lockfile import PIN_GRACE
    from reducer.engine import VERIFY_GRACE
    (tmp_path / "hangs.py").write_text("import time\n\nprint('serving')\nwhile True:\n    time.sleep(1)\n")
    started = time.monotonic()
    proc = reprobot("reduce", "hangs.py", "--hang-after", "2", "--timeout", "10", "--max-time", "30",
                    "--out", "store", cwd=tmp_path)
    took = time.monotonic() - started
    assert took < 30 + VERIFY_GRACE + PIN_GRACE, (took, proc.stdout[-2000:], proc.stderr[-2000:])
    assert proc.returncode in (0, ExitCode.TIME_LIMIT), proc.stderr
    # the candidates ran hangs.py, pinning ran its repro from a reprobot-modules-* copy
    left = subprocess.run(["pgrep", "-f", r"hangs\.py|reprobot-modules-"], capture_output=True, text=True).stdout.split()
    assert left == [], "processes of the run are left"


def test_pinning_after_the_time_limit_says_how_to_pin_and_runs_nothing(tmp_path, capsys) -> None:
    from types import SimpleNamespace
    from bot.reduction import capture_environment
    from bot.store import ReproDir
    repro = ReproDir(tmp_path / "hangs-1234")
    repro.path.mkdir()
    past = SimpleNamespace(deadline=time.monotonic() - 120, timeout=5.0)
    capture_environment(SimpleNamespace(runner=SimpleNamespace(python=sys.executable)), repro, past)
    out = capsys.readouterr().out
    assert "environment not pinned" in out and "reprobot env" in out
    assert not repro.env_json.exists() and not repro.requirements_lock.exists()


def test_the_help_states_the_graces_the_code_uses() -> None:
    from bot.cli import build_parser
    from bot.env.lockfile import PIN_GRACE
    from reducer.engine import VERIFY_GRACE
    text = " ".join(next(a for a in build_parser("reduce")._subparsers._group_actions[0].choices["reduce"]._actions
                         if "--max-time" in a.option_strings).help.split())
    assert f"at least {VERIFY_GRACE:.0f} s" in text and f"pinned within {PIN_GRACE:.0f} s more" in text


def test_a_reduction_stopped_at_max_time_is_verified_like_a_finished_one(tmp_path) -> None:
    # issue #40: a stop at --max-time used to leave `verified: null`, no traceback.txt and no
    # lock, and the draft showed the original's traceback beside the repro's code
    # every variable is needed (a module beside the script counts them) and every run takes a
    # second: the search cannot end within 10 s
    (tmp_path / "counting.py").write_text(
        "import time\n\ndef check(names):\n    time.sleep(1.0)\n"
        "    if sum(1 for n in names if n.startswith('v')) >= 40:\n        raise ValueError('forty of them')\n")
    body = ["import counting", *[f"v{i} = {i} * 2" for i in range(40)], "counting.check(dir())"]
    (tmp_path / "slow.py").write_text("\n".join(body) + "\n")
    proc = reprobot("reduce", "slow.py", "--no-trace", "--max-time", "10", "--out", "store", cwd=tmp_path)
    assert proc.returncode == ExitCode.TIME_LIMIT, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "verified cold" in proc.stdout
    folder = next((tmp_path / "store").iterdir())
    import json
    reduction = json.loads((folder / "reduction.json").read_text())
    assert reduction["status"] == "stopped: time limit" and reduction["verified"] == "beside its files"
    assert "ValueError: forty of them" in (folder / "traceback.txt").read_text()      # the repro's own run
    assert (folder / "env.json").is_file() and (folder / "requirements.lock").is_file()
