"""Limits the posted code cannot exceed in local runs (issue #39): processes and threads at once,
and what a run writes in its folders (its copy of the script's folder, TMPDIR, HOME). A run that
reaches one is stopped and is not the same failure; the original reaching one is one line."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from reducer.errors import ExitCode
from reducer.run import guard
from reducer.run.limits import Quota
from reducer.run.runner import Runner, RunSpec
from reducer.run.zygote import ZygotePool

ROOT = Path(__file__).resolve().parents[1]


def reprobot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)}, timeout=300)


FORKS = '''\
import os, subprocess, time
kids = 0
subprocess.Popen(["setsid", "sleep", "{marker}"])      # a daemon out of the run's group
for _ in range(400):
    if os.fork() == 0:
        time.sleep({marker})
        os._exit(0)
    kids += 1
raise RuntimeError(f"started {{kids}} of 400 processes")
'''


def _left(marker: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", f"sleep {marker}|fork-{marker}"], capture_output=True,
                          text=True).stdout.split()


@pytest.mark.parametrize("counted_by", ["cgroup", "process group"])
def test_a_fork_bomb_is_stopped_cold_and_warm_and_nothing_of_it_is_left(tmp_path: Path, counted_by: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if counted_by == "cgroup" and guard.pids_parent() is None:
        pytest.skip("no pids cgroup can be made here (cgroup v1 pids, or a v2 subtree with pids delegated)")
    if counted_by == "process group":
        monkeypatch.setattr(guard, "_PARENT", [None])     # as where /sys/fs/cgroup is not ours to write
    marker = f"{300 + len(counted_by)}.{os.getpid() % 1000}"
    src = FORKS.format(marker=marker)
    script = tmp_path / f"fork-{marker}.py"
    script.write_text(src)
    runner = Runner(RunSpec(script=script, timeout=60, quota=Quota(processes=64, disk=0)))
    cold = runner.run(src)
    runner.zygotes = ZygotePool(runner.python, ["json"], runner.base_environment())
    try:
        warm = runner.run(src, warm=True)
    finally:
        runner.zygotes.stop()
    assert runner.warm_runs == 1
    for outcome in (cold, warm):
        assert outcome.limit == "the run hit the process limit (64 processes and threads at once, --max-processes)"
        assert [r.exc_type for r in outcome.tracebacks] == ["RunLimit"], outcome.tracebacks
        if counted_by == "cgroup":       # the kernel refused the forks past 64
            assert "started 400 of 400" not in outcome.stderr, outcome.stderr[-500:]
    assert _left(marker) == []          # the forks and the setsid daemon: killed with the run


def test_a_run_that_fills_its_tmpdir_is_stopped_and_one_writing_little_is_not(tmp_path: Path) -> None:
    src = ("import os, tempfile\nn = int(os.environ['MIB'])\n"
           "with open(os.path.join(tempfile.gettempdir(), 'fill.bin'), 'wb') as fh:\n"
           "    for _ in range(n):\n        fh.write(b'x' * (1 << 20))\n"
           "raise ValueError('wrote it')\n")
    (tmp_path / "data.bin").write_bytes(b"d" * (8 << 20))      # the script's folder: copied, not written
    (tmp_path / "fill.py").write_text(src)
    runner = Runner(RunSpec(script=tmp_path / "fill.py", timeout=60, quota=Quota(processes=0, disk=4 << 20)))
    big, small = runner.run(src, extra_env={"MIB": "32"}), runner.run(src, extra_env={"MIB": "2"})
    assert big.limit == "the run hit the disk limit (over 4 MiB written in its folders, --max-disk)", big
    assert small.limit is None and small.tracebacks[-1].message == "wrote it"


def test_a_write_past_the_file_size_limit_names_it(tmp_path: Path) -> None:
    src = "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (4 << 20))\n"
    (tmp_path / "w.py").write_text(src)
    outcome = Runner(RunSpec(script=tmp_path / "w.py", timeout=60, limits={"FSIZE": 1 << 20})).run(src)
    assert outcome.limit == "the run hit the file size limit (1 MiB per file, --max-file-size): File too large"


def test_the_original_hitting_a_limit_is_one_line_and_its_own_exit_status(tmp_path: Path) -> None:
    marker = f"{310}.{os.getpid() % 1000}"
    (tmp_path / "bomb.py").write_text(FORKS.format(marker=marker))
    proc = reprobot("reduce", "bomb.py", "--max-processes", "64", "--no-env", "--out", "store", cwd=tmp_path)
    assert proc.returncode == ExitCode.RUN_LIMIT, proc.stdout[-1000:] + proc.stderr[-1000:]
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert "hit the process limit (64 processes and threads at once, --max-processes)" in proc.stderr
    assert not (tmp_path / "store").exists()        # nothing recorded: there is no failure to report
    assert _left(marker) == []      # (the disk limit's line: tests/test_action_limits.py)


# The oracle the reduction judges candidates with: the same ValueError after 400 forks, or
# after writing 48 MiB, is not the original's failure once the run was stopped at its limit;
# without the limits (the control) it is.
ORIGINAL = "import os\nraise ValueError('the bug')\n"
FORKING = ("import os, time\nfor _ in range(400):\n    if os.fork() == 0:\n        time.sleep(20)\n"
           "        os._exit(0)\nraise ValueError('the bug')\n")
WRITING = "open('out.bin', 'wb').write(b'x' * (48 << 20))\nraise ValueError('the bug')\n"


@pytest.mark.parametrize("candidate", [FORKING, WRITING], ids=["forks 400", "writes 48 MiB"])
def test_a_candidate_that_hits_a_limit_is_not_the_same_failure(tmp_path: Path, candidate: str) -> None:
    from reducer.failure.oracle import Oracle
    from reducer.failure.signature import MatchOptions, signature_of
    (tmp_path / "s.py").write_text(ORIGINAL)
    verdicts = {}
    for quota in (Quota(processes=64, disk=16 << 20), Quota(processes=0, disk=0)):
        runner = Runner(RunSpec(script=tmp_path / "s.py", timeout=60, quota=quota))
        original = runner.run(ORIGINAL)
        oracle = Oracle(runner, signature_of(original.tracebacks[-1]), MatchOptions(), timeout=60)
        verdicts[quota.processes > 0] = oracle.test(candidate).interesting
    assert verdicts == {True: False, False: True}


def test_stale_run_cgroups_of_a_dead_reprobot_are_removed() -> None:
    parent = guard.pids_parent()
    if parent is None:
        pytest.skip("no pids cgroup can be made here")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = Path(parent, f"reprobot-run-{dead}-{uuid.uuid4().hex[:12]}")
    stale.mkdir()
    assert guard.remove_stale() >= 1 and not stale.exists()
