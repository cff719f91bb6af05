"""How a warm candidate ends (#29): it reports its exit status to the zygote once its script,
atexit handlers and streams are done, and the zygote answers before the kernel has torn the
process down; the next candidate is forked from the zygote while the current one runs; the way
out (reducer/run/zygote_exit.py) leaves only torch.library's deregistrations out. Real runs, warm
against cold."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reducer.run.runner import Runner, RunSpec
from tests.test_warm import _pool, both, same, write

ROOT = Path(__file__).resolve().parents[1]


def test_a_process_the_script_forked_does_not_report_for_the_candidate(tmp_path):
    """The script forks, and the forked process leaves the script by sys.exit(7) at once: it goes
    back through the zygote's code on its way out, but only the candidate itself reports, so
    the run's status is the candidate's 3, as cold."""
    script = write(tmp_path / "forks.py", """
        import json
        import os
        import sys
        import time

        pid = os.fork()
        if pid == 0:
            sys.exit(7)
        _, status = os.waitpid(pid, 0)
        print("child status", os.waitstatus_to_exitcode(status), flush=True)
        time.sleep(0.3)
        json.loads("{x")
    """)
    warm, cold = both(script)
    assert cold.returncode == 1 and "child status 7" in cold.stdout
    same(warm, cold)


@pytest.mark.parametrize("ending,code", [("os._exit(5)", 5),
                                         ("os.kill(os.getpid(), signal.SIGKILL)", -9)])
def test_an_ending_without_a_report_is_the_exit_status(tmp_path, ending, code):
    """os._exit and a signal skip the candidate's report: the status is waitpid's, as cold."""
    script = write(tmp_path / "ends.py", f"""
        import json
        import os
        import signal

        print("before", json.dumps([1]), flush=True)
        {ending}
    """)
    warm, cold = both(script)
    assert cold.returncode == code
    assert warm.returncode == code and warm.stdout == cold.stdout


def test_output_written_on_the_way_out_is_all_there(tmp_path):
    """The candidate lets go of its streams only after its atexit handlers and a thread that
    writes until it is joined: nothing they write is lost to the early report."""
    script = write(tmp_path / "loud.py", """
        import atexit
        import json
        import sys
        import threading
        import time

        def late():
            time.sleep(0.2)
            for i in range(2000):
                print("thread line", i)

        atexit.register(lambda: sys.stderr.write("atexit " + "x" * 200000 + "\\n"))
        atexit.register(lambda: print("atexit stdout", json.dumps({"n": 2000})))
        threading.Thread(target=late).start()
        raise SystemExit(4)
    """)
    warm, cold = both(script)
    assert cold.returncode == 4 and cold.stdout.count("thread line") == 2000
    same(warm, cold)
    assert warm.stderr == cold.stderr


def test_each_candidate_is_a_fresh_fork_of_the_zygote(tmp_path):
    """The next candidate is forked while the current one runs, from the zygote: nothing the
    current one changes (a module's state, the environment, the cwd) reaches it."""
    script = write(tmp_path / "marks.py", """
        import json
        import os

        print("marker", getattr(json, "_reprobot_test_marker", None), os.environ.get("MARK_SET_BY_RUN"),
              os.path.basename(os.getcwd()))
        json._reprobot_test_marker = 1
        os.environ["MARK_SET_BY_RUN"] = "1"
        os.chdir("/")
        json.loads("{x")
    """)
    source = script.read_text()
    runner = Runner(RunSpec(script=script, timeout=60))
    runner.zygotes = _pool(runner, source)
    try:
        outs = [runner.run(source) for _ in range(3)]
        assert runner.warm_runs == 3 and runner.warm_fallbacks == 0
    finally:
        runner.zygotes.stop()
    for out in outs:
        assert out.stdout == "marker None None work\n"
        assert [r.exc_type for r in out.tracebacks] == ["json.decoder.JSONDecodeError"]


def test_the_way_out_leaves_out_only_torch_librarys_deregistrations(tmp_path):
    """zygote_exit.finish() in a process that imported torch: the user's atexit handler and
    finalizer run, in order, and torch.library's deregistrations are the only finalizers left."""
    pytest.importorskip("torch")
    code = textwrap.dedent(f"""
        import importlib.util, weakref, atexit
        import torch
        spec = importlib.util.spec_from_file_location("way_out", {str(ROOT / "reducer" / "run" / "zygote_exit.py")!r})
        way_out = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(way_out)

        class Held:
            pass

        held = Held()
        weakref.finalize(held, print, "user finalizer ran")
        atexit.register(print, "user atexit ran")
        before = sum(1 for f, i in weakref.finalize._registry.items() if i.func.__name__ == "_del_library")
        way_out.finish()
        left = [i.func.__module__ + "." + i.func.__name__ for i in weakref.finalize._registry.values()]
        print("torch.library finalizers", before, "left", sorted(set(left)), len(left))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["user atexit ran", "user finalizer ran"]
    n = int(lines[2].split()[2])
    assert n > 0 and lines[2].endswith(f"left ['torch.library._del_library'] {n}")
