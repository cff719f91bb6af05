"""Limits the posted code cannot exceed in the Action's sandbox (issue #39): the red team's
candidate started 400 of 400 processes, and wrote 256 MiB in its scratch plus 256 MiB in /tmp,
which was the host's. The code runs for real in the sandbox (a refusal fails these tests; they
skip only where the kernel has no user namespaces), and the reply's detail names the limit."""
from __future__ import annotations

import dataclasses
import os
import resource
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from bot.action.event import load_event
from bot.action.reproduce import ReproduceOptions, reproduce
from bot.action.sandbox import Limits
from tests.sandbox_support import assert_ran_isolated, needs_userns

EVENTS = Path(__file__).parent / "data" / "events"

FORKS = '''\
import os, time
kids = 0
for _ in range(400):
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
    kids += 1
raise RuntimeError(f"started {kids} of 400 processes")
'''

FILLS = '''\
import os
block = b"x" * (1 << 20)
with open("fill-scratch.bin", "wb") as fh:
    for _ in range(256):
        fh.write(block)
with open("{outside}", "wb") as fh:
    for _ in range(256):
        fh.write(block)
raise RuntimeError("wrote 512 MiB")
'''


def _reproduce(tmp_path: Path, script: str, limits: Limits):
    ev = dataclasses.replace(load_event(EVENTS / "labeled_failing.json"), body=f"```python\n{script}```\n")
    opts = ReproduceOptions(out=tmp_path / "artifact", scratch_root=tmp_path / "scratch", max_time=60, timeout=60,
                            runs=1, limits=limits)
    home = tmp_path / "runner-home"
    home.mkdir()
    return reproduce(ev, opts, environ={**os.environ, "HOME": str(home), "REPROBOT_GATE_ALLOWED": "true"})


@needs_userns
def test_a_fork_bomb_is_stopped_at_the_process_limit_and_the_reply_says_so(tmp_path: Path) -> None:
    result = _reproduce(tmp_path, FORKS, Limits(procs=64))
    assert_ran_isolated(result)
    # the original itself hit the limit: nothing to reduce, one line naming it
    assert result.status == "error", (result.status, result.detail)
    assert "hit the process limit (64 processes and threads at once, --max-procs)" in result.detail, result.detail
    assert "started 400 of 400" not in result.detail
    left = subprocess.run(["pgrep", "-f", "started {kids} of 400"], capture_output=True, text=True).stdout.split()
    assert left == []


@needs_userns
def test_a_run_that_fills_its_scratch_and_tmp_is_stopped_and_the_hosts_tmp_stays_empty(tmp_path: Path) -> None:
    outside = Path("/tmp") / f"reprobot-fill-{uuid.uuid4().hex}"
    seen_on_host = []
    done = threading.Event()

    def watch() -> None:        # the host's /tmp, all the while the sandbox runs
        while not done.is_set():
            if outside.exists():
                seen_on_host.append(outside.stat().st_size)
            done.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = _reproduce(tmp_path, FILLS.format(outside=outside), Limits(disk=256 << 20))
    finally:
        done.set()
        watcher.join()
        outside.unlink(missing_ok=True)
    assert_ran_isolated(result)
    # each run may write half the scratch (128 MiB): the original is stopped there
    assert result.status == "error", (result.status, result.detail)
    assert "hit the disk limit (over 128 MiB written in its folders, half of --max-disk-mb)" in result.detail, \
        result.detail
    assert seen_on_host == []       # /tmp inside is the capped scratch, never the host's


def test_without_namespaces_the_jail_stops_a_step_whose_scratch_outgrows_the_disk_limit(tmp_path: Path) -> None:
    """--isolation none has no tmpfs to cap the scratch: the jail measures the folder instead."""
    from bot.action import jail
    from bot.action.sandbox import limits_hit
    scratch = tmp_path / "scratch"
    (scratch / "logs").mkdir(parents=True)
    writer = ("import time\nwith open('fill.bin', 'wb') as fh:\n    for _ in range(64):\n"
              "        fh.write(b'x' * (1 << 20)); fh.flush()\ntime.sleep(60)\n")
    plan = {"isolate": False, "scratch": str(scratch), "env": dict(os.environ),
            "limits": {"nproc": resource.getrlimit(resource.RLIMIT_NPROC)[1], "fsize": 1 << 30, "disk": 16 << 20,
                       "shm": 0}}
    step = {"name": "reduce", "argv": [sys.executable, "-c", writer], "wall": 50}
    started = time.monotonic()
    ran = jail.run_step(step, plan, str(scratch / "logs"), None)
    assert ran["exit"] is None and ran["limits"] == ["disk"], ran
    assert time.monotonic() - started < 30          # stopped there, not at its wall time
    assert limits_hit({"steps": [ran]}, None, Limits(disk=16 << 20)) == \
        ["the sandbox's scratch filled up (16 MiB, --max-disk-mb)"]
