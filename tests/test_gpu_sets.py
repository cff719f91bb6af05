"""GPU sets per job (#29), without a GPU: a fake device list, and CPU scripts that read
CUDA_VISIBLE_DEVICES the way a model split over two cards depends on it (they raise the
cross-device error only when two devices are listed). The real thing: examples/gpu_two_cards/.
"""
from __future__ import annotations

import sys
import textwrap
import threading
import time

import pytest

import reducer.run.gpu as gpu_mod
from reducer.engine import DONE, Options, Quiet, reduce
from reducer.errors import ExitCode, ReprobotError
from reducer.failure.original import FailureSpec, find_failure
from reducer.run.devices import DEVICES_ENV, read_devices
from reducer.run.gpu import GpuPool, split_sets
from reducer.run.runner import Runner, RunSpec

SAME_DEVICE = ("Expected all tensors to be on the same device, but found at least two devices, "
               "cuda:1 and cuda:0!")


@pytest.fixture(autouse=True)
def no_nvidia_smi(monkeypatch):
    """No nvidia-smi answers (also on a GPU machine): release checks have nothing to wait for."""
    monkeypatch.setattr(gpu_mod, "_smi", lambda *a: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def write(path, text):
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def spec_for(script, **kw) -> FailureSpec:
    return FailureSpec(script=script, source=script.read_text(), python=sys.executable, timeout=60, **kw)


@pytest.fixture
def recorded_runs(monkeypatch):
    """Every Runner.run: (source, CUDA_VISIBLE_DEVICES it was handed, warm, traced)."""
    calls: list[tuple[str, str | None, object, bool]] = []
    real = Runner.run
    lock = threading.Lock()

    def spy(self, source, **kw):
        env = kw.get("extra_env") or {}
        with lock:
            calls.append((source, env.get("CUDA_VISIBLE_DEVICES"), kw.get("warm"), kw.get("launcher") is not None))
        return real(self, source, **kw)

    monkeypatch.setattr(Runner, "run", spy)
    return calls


# ---- allocation --------------------------------------------------------------------------------
def test_two_gpus_jobs_needing_one_or_two():
    assert split_sets(["0", "1"], 1) == [("0",), ("1",)]
    assert split_sets(["0", "1"], 2) == [("0", "1")]
    one = GpuPool(["0", "1"], per_job=1)
    two = GpuPool(["0", "1"], per_job=2)
    assert (one.slots, two.slots) == (2, 1)
    with two.acquire() as slot:
        assert slot.gpus == ("0", "1") and slot.env() == {"CUDA_VISIBLE_DEVICES": "0,1"}
        assert slot.env(1) == {"CUDA_VISIBLE_DEVICES": "0"}
    with pytest.raises(ReprobotError) as e:
        GpuPool(["0", "1"], per_job=3)
    assert e.value.exit_code == ExitCode.USAGE and "--gpus-per-job" in e.value.message
    # leftovers are not used: 3 GPUs, 2 per job → one set
    assert split_sets(["0", "1", "2"], 2) == [("0", "1")]


def test_four_gpus_two_per_job_shared_by_two_jobs():
    pool = GpuPool(["0", "1", "2", "3"], per_gpu=2, per_job=2)
    assert pool.sets == [("0", "1"), ("2", "3")] and pool.slots == 4
    holders: dict[str, int] = {}
    peak: dict[str, int] = {}
    seen: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4, timeout=10)

    def job(wait: bool) -> None:
        with pool.acquire() as slot:
            with lock:
                seen.append(slot.gpu)
                holders[slot.gpu] = holders.get(slot.gpu, 0) + 1
                peak[slot.gpu] = max(peak.get(slot.gpu, 0), holders[slot.gpu])
            if wait:
                barrier.wait()   # all four slots held at once
            time.sleep(0.2)
            with lock:
                holders[slot.gpu] -= 1

    threads = [threading.Thread(target=job, args=(i < 4,)) for i in range(6)]
    for t in threads[:4]:
        t.start()
    time.sleep(0.05)
    for t in threads[4:]:
        t.start()
    for t in threads:
        t.join()
    # the four that held their slots at once had two of each set; the two that queued got
    # whichever sets came back first
    assert sorted(seen[:4]) == ["0,1", "0,1", "2,3", "2,3"]
    assert len(seen) == 6 and set(seen) == {"0,1", "2,3"}
    assert peak == {"0,1": 2, "2,3": 2}   # a set is shared by at most --jobs-per-gpu jobs


def test_acquire_waits_for_the_set_asked_for():
    pool = GpuPool(["0", "1", "2", "3"], per_job=2)
    got: list[str] = []
    with pool.acquire() as first:
        assert first.gpus == ("0", "1")
        t = threading.Thread(target=lambda: got.append(_take(pool, ("0", "1"))))
        t.start()
        time.sleep(0.3)
        assert got == []            # ("2", "3") is free, but not the set asked for
    t.join(5)
    assert got == ["0,1"]
    with pytest.raises(ValueError):
        with pool.acquire(("1", "2")):
            pass


def _take(pool, want):
    with pool.acquire(want) as slot:
        return slot.gpu


# ---- measuring what the original used ---------------------------------------------------------
FAKE_TORCH = """
    import os
    import sys
    import types

    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
    # a fake torch.cuda: the model is split over the first two visible devices
    cuda = types.SimpleNamespace(is_initialized=lambda: True, device_count=lambda: len(visible),
                                 max_memory_allocated=lambda i: 4096 if i < 2 else 0,
                                 memory_reserved=lambda i: 0)
    sys.modules["torch"] = types.SimpleNamespace(cuda=cuda)
    if len(visible) >= 2:
        raise RuntimeError("%s")
""" % SAME_DEVICE


def test_the_exit_hook_records_the_devices_with_memory(tmp_path):
    script = write(tmp_path / "split.py", FAKE_TORCH)
    out = tmp_path / "devices.jsonl"
    runner = Runner(RunSpec(script=script))
    runner.run(script.read_text(), extra_env={DEVICES_ENV: str(out), "CUDA_VISIBLE_DEVICES": "2,3,5,7"})
    use = read_devices(out)
    assert use.cuda_processes == 1 and use.visible == 4
    assert use.used == ["2", "3"]      # indices 0 and 1 of "2,3,5,7", as physical devices
    # a process that never initialised CUDA reports so, and uses nothing
    plain = write(tmp_path / "plain.py", "print('hi')\n")
    out2 = tmp_path / "plain.jsonl"
    Runner(RunSpec(script=plain)).run(
        plain.read_text(), extra_env={DEVICES_ENV: str(out2)})
    none = read_devices(out2)
    assert none.processes == 1 and none.cuda_processes == 0 and none.used == []


def test_a_job_gets_as_many_gpus_as_the_original_used(tmp_path, recorded_runs):
    script = write(tmp_path / "split.py", FAKE_TORCH)
    failure = find_failure(spec_for(script, gpus=["0", "1", "2", "3"]))
    plan = failure.gpu
    assert (plan.per_job, plan.source, plan.set) == (2, "measured", ("0", "1"))
    assert plan.measured["used"] == ["0", "1"]
    # run 1 sees every GPU; the confirmation the set; the one-GPU check its first GPU
    assert [c[1] for c in recorded_runs] == ["0,1,2,3", "0,1", "0"]
    assert plan.needs_gpus == 2 and plan.one_gpu == "passes" and not plan.one_gpu_hangs
    assert GpuPool(failure.spec.gpus, per_job=plan.per_job).sets == [("0", "1"), ("2", "3")]


# ---- "needs 2 GPUs" ---------------------------------------------------------------------------
TWO_ONLY = """
    import json
    import os

    devices = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
    padding = json.dumps([1, 2, 3])
    if len(devices) < 2:
        print("one device: nothing to mix up")
        raise SystemExit(0)
    raise RuntimeError("%s")
""" % SAME_DEVICE


def test_needs_two_gpus_is_detected(tmp_path):
    # (that signature.json stores it: tests/test_gpu_sets_folder.py)
    script = write(tmp_path / "two.py", TWO_ONLY)
    failure = find_failure(spec_for(script, gpus=["0", "1"], gpus_per_job=2))
    assert failure.gpu.source == "--gpus-per-job" and failure.gpu.set == ("0", "1")
    assert failure.gpu.needs_gpus == 2 and failure.gpu.one_gpu == "passes"


def test_a_failure_that_shows_on_one_gpu_needs_nothing(tmp_path):
    script = write(tmp_path / "any.py", f"raise RuntimeError({SAME_DEVICE!r})\n")
    failure = find_failure(spec_for(script, gpus=["0", "1"], gpus_per_job=2))
    assert failure.gpu.needs_gpus is None and failure.gpu.one_gpu == "fails the same way"


def test_pinned_confirmation_that_loses_the_failure_says_why(tmp_path):
    # nothing measured (no torch): one GPU per job, and the confirmation on one GPU passes
    script = write(tmp_path / "two.py", TWO_ONLY)
    with pytest.raises(ReprobotError) as e:
        find_failure(spec_for(script, gpus=["0", "1"]))
    assert e.value.exit_code == ExitCode.FLAKY
    assert "--gpus-per-job 2" in e.value.message and "run 2 only 0" in e.value.message


# ---- the same set everywhere, and the walk-back (the engine alone: reducer/engine.py) ----------
class Figures(Quiet):
    """The engine's listener, keeping the last figures it was handed (reduction.json's)."""

    figures: dict = {}

    def accepted(self, best, figures):
        self.figures = figures


def _reduce(script, **opts):
    failure = find_failure(spec_for(script, gpus=["0", "1", "2", "3"], gpus_per_job=2))
    listener = Figures()
    result = reduce(failure, Options(jobs=2, jobs_per_gpu=2, **opts), listener)
    return failure, result, listener.figures


class LastSetFirst(GpuPool):
    """A pool that hands out its last set first (as if another job held the first): a run that
    does not ask for the confirmation's set gets another one."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self._free.reverse()


def test_confirmation_warm_check_and_final_run_share_one_set(tmp_path, recorded_runs, monkeypatch):
    import reducer.engine
    monkeypatch.setattr(reducer.engine, "GpuPool", LastSetFirst)
    script = write(tmp_path / "two.py", TWO_ONLY)
    failure, result, data = _reduce(script)
    assert result.stopped == DONE
    original = script.read_text()
    runs_of_original = [(cvd, warm) for src, cvd, warm, traced in recorded_runs if src == original and not traced]
    # run 1 (all GPUs), confirmation (cold, the set), one-GPU check, then the warm check
    assert runs_of_original[:3] == [("0,1,2,3", False), ("0,1", False), ("0", False)]
    warm_checks = [cvd for cvd, warm in runs_of_original if warm is True]
    assert warm_checks == ["0,1"]
    assert data["warm"]["enabled"], data["warm"]
    assert data["gpu_sets"] == [["0", "1"], ["2", "3"]] and data["gpus_per_job"] == 2
    # every other run (candidates, traced runs) got one whole set, never a mix or all four
    assert {cvd for _, cvd, _, _ in recorded_runs[3:]} <= {"0,1", "2,3", "0"}
    # cold runs after the search: the final verification on the set, and its one-GPU check
    cold_after = [cvd for src, cvd, warm, traced in recorded_runs[4:] if warm is False and not traced]
    assert "0,1" in cold_after and "0" in cold_after
    assert "2,3" not in cold_after


def test_a_result_that_loses_the_need_for_two_gpus_is_walked_back(tmp_path):
    script = write(tmp_path / "two.py", TWO_ONLY)
    failure, result, data = _reduce(script, trace=False)
    final = result.best
    assert data["needs_gpus"] == 2 and data["status"] == "done" and result.stopped == DONE
    # the search itself accepts dropping the guard (it still fails on the set); the final
    # verification notices that it then fails on one GPU too, and walks back
    assert "len(devices) < 2" in final, final
    assert data.get("cold_fallback") is True and result.cold_fallback


def _verdict_setup(tmp_path, source):
    from reducer.engine import gpu_pool, make_oracle
    script = write(tmp_path / "two.py", source)
    failure = find_failure(spec_for(script, gpus=["0", "1"], gpus_per_job=2))
    pool = gpu_pool(Options(), failure)
    return failure, make_oracle(failure, pool, None)


def test_walk_back_skips_results_that_fail_or_hang_on_one_gpu(tmp_path, recorded_runs):
    from reducer.reduction.cold_verdict import cold_verdict
    failure, oracle = _verdict_setup(tmp_path, TWO_ONLY)
    assert failure.gpu.needs_gpus == 2
    keeps = TWO_ONLY.replace("padding = json.dumps([1, 2, 3])\n    ", "")
    keeps = textwrap.dedent(keeps).lstrip()
    hangs = keeps.replace('print("one device: nothing to mix up")', "import time; time.sleep(600)")
    loses = f"raise RuntimeError({SAME_DEVICE!r})\n"
    history = [failure.spec.source, keeps, hangs, loses]
    before = len(recorded_runs)
    source, record, _ = cold_verdict(failure, oracle, loses, history)
    assert source == keeps and record is not None and SAME_DEVICE in record.message
    tried = [(src, cvd) for src, cvd, _, _ in recorded_runs[before:]]
    assert (hangs, "0") in tried           # the hang on one GPU was run and refused
    assert (loses, "0") in tried and (keeps, "0") in tried
    assert all(cvd in ("0,1", "0") for _, cvd in tried)


def test_a_hang_on_one_gpu_is_allowed_when_the_original_hung_there(tmp_path):
    from reducer.reduction.cold_verdict import keeps_needing_gpus
    failure, oracle = _verdict_setup(tmp_path, TWO_ONLY)
    hangs = textwrap.dedent(TWO_ONLY).lstrip().replace('print("one device: nothing to mix up")',
                                                         "import time; time.sleep(600)")
    oracle.timeout = 2.0
    assert not keeps_needing_gpus(failure, oracle, hangs)
    failure.gpu.one_gpu_hangs = True
    assert keeps_needing_gpus(failure, oracle, hangs)
