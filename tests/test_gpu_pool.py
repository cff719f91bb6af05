"""GPU pinning and release checks, against a fake nvidia-smi made for the test.

The fake reads its state from files the test controls, so the pool's protocol (pin one
GPU per concurrent candidate, wait until the killed candidate's memory is gone before
handing the GPU out again) is exercised for real without a GPU. The real thing runs on
the device (see tests/test_gpu_example.py, marked gpu).
"""
from __future__ import annotations

import os
import textwrap
import threading
import time
from pathlib import Path

import pytest

from reducer.errors import ReprobotError
from reducer.failure.oracle import Oracle
from reducer.failure.signature import MatchOptions, Signature
from reducer.run.gpu import GpuPool, compute_pids, parse_gpus, visible_gpus, wait_released
from reducer.run.runner import Runner, RunSpec

FAKE_SMI = textwrap.dedent("""\
    #!/usr/bin/env python3
    import os, sys
    state = os.environ["FAKE_SMI_DIR"]
    args = " ".join(sys.argv[1:])
    if "--query-gpu=index,uuid" in args:
        print("0, GPU-aaaa\\n1, GPU-bbbb")
    elif "--query-gpu=index" in args:
        print("0\\n1")
    elif "--query-compute-apps" in args:
        path = os.path.join(state, "apps")
        if os.path.exists(path):
            print(open(path).read(), end="")
    else:
        sys.exit(9)
""")


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SMI_DIR", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return tmp_path / "apps"


def test_visible_gpus_from_env_and_smi(fake_smi, monkeypatch):
    assert visible_gpus() == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert visible_gpus() == ["3", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert visible_gpus() == []


def test_parse_gpus(fake_smi):
    assert parse_gpus("0, 1") == ["0", "1"]
    assert parse_gpus("none") == []
    assert parse_gpus(None) == ["0", "1"]
    with pytest.raises(ReprobotError):
        parse_gpus("zero")


def test_wait_released_waits_for_the_killed_process(fake_smi):
    fake_smi.write_text("GPU-aaaa, 100\nGPU-aaaa, 4242\nGPU-bbbb, 777\n")
    assert compute_pids("0") == {100, 4242}
    assert compute_pids("1") == {777}

    def release() -> None:
        time.sleep(0.6)
        fake_smi.write_text("GPU-aaaa, 100\nGPU-bbbb, 777\n")

    threading.Thread(target=release).start()
    start = time.monotonic()
    assert wait_released("0", baseline={100}, timeout=10)
    assert 0.5 < time.monotonic() - start < 5
    # Memory that never goes away is reported, not waited on forever.
    fake_smi.write_text("GPU-aaaa, 100\nGPU-aaaa, 999\n")
    assert not wait_released("0", baseline={100}, timeout=0.5)


def test_each_parallel_candidate_gets_its_own_gpu(fake_smi, tmp_path):
    fake_smi.write_text("")
    script = tmp_path / "s.py"
    source = textwrap.dedent("""
        import os, time
        time.sleep(0.5)
        raise RuntimeError("on gpu")
    """)
    script.write_text(source)
    runner = Runner(RunSpec(script=script))
    pool = GpuPool(["0", "1"])
    seen: list[str] = []
    real_run = runner.run

    def spy(src, **kw):
        seen.append((kw.get("extra_env") or {}).get("CUDA_VISIBLE_DEVICES"))
        return real_run(src, **kw)

    runner.run = spy  # observe the pinning the oracle asks for; the runs themselves are real
    oracle = Oracle(runner, Signature("RuntimeError", "on gpu", ()), MatchOptions(), gpus=pool)
    threads = [threading.Thread(target=oracle.test, args=(source,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == ["0", "0", "1", "1"]
    assert oracle.runs == 4 and pool.unreleased == 0


def test_no_gpus_means_no_pinning(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi at all
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_gpus() == []
    pool = GpuPool([])
    with pool.acquire() as slot:
        assert slot.gpu is None


def test_a_live_candidate_sharing_the_gpu_is_not_waited_for(fake_smi):
    import subprocess
    import sys
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        fake_smi.write_text(f"GPU-aaaa, {other.pid}\n")
        # Alive, in a group that is not the killed candidate's: another job's memory.
        assert wait_released("0", baseline=set(), killed_pgid=os.getpgid(os.getpid()), timeout=0.5)
        # The killed candidate's own group still listed: wait (and give up, reported).
        assert not wait_released("0", baseline=set(), killed_pgid=other.pid, timeout=0.5)
    finally:
        other.kill()
        other.wait()


def test_jobs_per_gpu_lets_small_candidates_share(fake_smi):
    fake_smi.write_text("")
    pool = GpuPool(["0"], per_gpu=2)
    assert pool.slots == 2
    inside: list[int] = []
    peak = [0]
    lock = threading.Lock()

    def job() -> None:
        with pool.acquire() as slot:
            assert slot.gpu == "0"
            with lock:
                inside.append(1)
                peak[0] = max(peak[0], len(inside))
            time.sleep(0.3)
            with lock:
                inside.pop()

    threads = [threading.Thread(target=job) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 2
