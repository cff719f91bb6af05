"""--hang-after S (#32): a run that prints nothing for S seconds is dumped (every process, all
threads, by faulthandler on SIGUSR1) and the waiting thread's innermost frames are the target."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from reducer.failure.tracebacks import hang_record

ROOT = Path(__file__).resolve().parent.parent

DEADLOCK = '''\
import threading
import time

a = threading.Lock()
b = threading.Lock()
log = []


def noise(k):
    return sum(range(k))


def first():
    with a:
        time.sleep(0.2)
        with b:
            log.append(1)


def second():
    with b:
        time.sleep(0.2)
        with a:
            log.append(2)


print(noise(5))
t1 = threading.Thread(target=first)
t2 = threading.Thread(target=second)
t1.start()
t2.start()
t1.join()
t2.join()
print("done", log)
'''

CHILD = '''\
import multiprocessing as mp


def noise(k):
    return sum(range(k))


def worker(lock, n):
    print("worker", noise(n), flush=True)
    lock.acquire()
    lock.acquire()      # not reentrant: waits for ever


if __name__ == "__main__":
    lock = mp.Lock()
    p = mp.Process(target=worker, args=(lock, 3))
    p.start()
    p.join()
    print("never")
'''


def reduce(tmp_path: Path, name: str, text: str) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp_path / name).write_text(text)
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", name, "--out", "s", "--no-env", "--hang-after", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [d] = [p for p in (tmp_path / "s").iterdir() if p.is_dir()]
    return proc, d


def test_the_waiting_thread_is_the_target():
    dump = ('Thread 0x00007f01 (most recent call first):\n'
            '  File "/usr/lib/python3.11/threading.py", line 1112 in _wait_for_tstate_lock\n'
            '  File "/usr/lib/python3.11/threading.py", line 1092 in join\n'
            '  File "dead.py", line 30 in <module>\n'
            'Thread 0x00007f02 (most recent call first):\n'
            '  File "dead.py", line 22 in second\n'
            '  File "/usr/lib/python3.11/threading.py", line 982 in run\n')
    record = hang_record(dump, 2)
    assert record.exc_type == "Hang" and record.message == "no progress for 2s; stack: second < run"
    assert [f.func for f in record.frames] == ["run", "second"]
    assert hang_record("nothing dumped\n", 2) is None


def check(proc, d: Path, funcs: list[str]) -> dict:
    sig = json.loads((d / "signature.json").read_text())["signature"]
    assert sig["exc_type"] == "Hang" and all(f in sig["message"] for f in funcs), sig
    red = json.loads((d / "reduction.json").read_text())
    # the repro, run cold, hangs at the same frames
    stack = sig["message"].split("; stack: ")[1]
    assert red["repro_record"]["exc_type"] == "Hang" and red["repro_record"]["message"].endswith(f"; stack: {stack}")
    from bot.issue.draft import build_draft
    assert f"It hangs: {sig['message']}" in build_draft(d, "transformers").body
    return sig


def test_a_deadlock_between_two_threads_reduces_to_one_that_hangs_the_same_way(tmp_path):
    proc, d = reduce(tmp_path, "dead.py", DEADLOCK)
    check(proc, d, ["stack: first < run < _bootstrap_inner"])
    repro = (d / "repro.py").read_text()
    assert "noise" not in repro and "print" not in repro
    assert "def first" in repro and "def second" in repro and repro.count("threading.Lock()") == 2


def test_a_hang_in_a_multiprocessing_child_reduces_to_one_that_hangs_there(tmp_path):
    proc, d = reduce(tmp_path, "child.py", CHILD)
    sig = check(proc, d, ["stack: worker < "])
    repro = (d / "repro.py").read_text()
    assert "noise" not in repro and "never" not in repro
    assert "Process(" in repro and "def worker" in repro   # still in the child: its frames say so


SLEEPY = '''\
import time


def noise(k):
    return sum(range(k))


def poll(ready):
    while not ready:
        time.sleep(0.05)


print(noise(3))
poll([])
'''


def test_a_sleeping_loop_is_not_reduced_to_a_busy_one(tmp_path):
    """The same frames, but `while not ready: pass` spins a core where the original waited: the
    run's CPU share while quiet is part of the hang's signature (#40)."""
    proc, d = reduce(tmp_path, "sleepy.py", SLEEPY)
    sig = check(proc, d, ["stack: poll < <module>"])
    assert ", waiting; stack:" in sig["message"]
    repro = (d / "repro.py").read_text()
    assert "noise" not in repro and "time.sleep(" in repro, repro
    # a later step (versions, contrast, watch) runs it by the folder's recipe: with the hang
    # watch on, so the repro hangs the same way there too, instead of running into the wall clock
    from bot.rerun.repro_run import ReproRunner, StoredRepro
    from bot.rerun.verdict import Kind
    from bot.store import ReproDir
    stored = StoredRepro.load(ReproDir(d))
    assert stored.recipe.env == {"REPROBOT_HANG_AFTER": "1"}
    runner = ReproRunner(stored, sys.executable)
    try:
        assert runner.verdict().kind is Kind.SAME
    finally:
        runner.close()


def test_spinning_is_a_share_of_a_core_while_quiet():
    from reducer.run.runner import _spinning
    assert _spinning(0.9, 1.0) and _spinning(0.3, 1.0)     # a busy loop, even on a loaded machine
    assert not _spinning(0.01, 1.0) and not _spinning(0.0, 0.0)
    dump = 'Thread 0x01 (most recent call first):\n  File "s.py", line 3 in poll\n  File "s.py", line 5 in <module>\n'
    assert hang_record(dump, 1, spinning=True).message == "no progress for 1s, spinning a core; stack: poll < <module>"
    assert hang_record(dump, 1, spinning=False).message == "no progress for 1s, waiting; stack: poll < <module>"
