"""Warm children (reducer/run/zygote_children.py) and traced children (reducer/analysis/trace.py), real runs.

A candidate's spawn / forkserver children start from the warm image (a child zygote the
candidate forked before the script ran); they must give what a cold child gives, see nothing
of the parent's state, and a traced run must see the lines only a child ran."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reducer.analysis.trace import runner_run_fn, trace_run
from reducer.passes.first_cut import cut
from reducer.run.runner import Runner, RunSpec
from reducer.run.zygote import ZygotePool, warm_imports
from tests.test_warm import same

ROOT = Path(__file__).resolve().parents[1]


def write(path: Path, code: str) -> Path:
    path.write_text(textwrap.dedent(code).lstrip())
    return path


def runner_for(script: Path, args: tuple[str, ...] = (), env: dict | None = None) -> Runner:
    runner = Runner(RunSpec(script=script, args=args, timeout=120, env=env or {}))
    runner.zygotes = ZygotePool(runner.python, warm_imports(script.read_text(), runner.script_dir),
                                runner.base_environment())
    return runner


def warm_and_cold(script: Path, args: tuple[str, ...] = (), env: dict | None = None):
    source = script.read_text()
    runner = runner_for(script, args, env)
    try:
        warm = runner.run(source)
        cold = runner.run(source, warm=False)
        assert runner.warm_runs == 1 and runner.warm_fallbacks == 0
        children = runner.zygotes.children()
    finally:
        runner.zygotes.stop()
    return warm, cold, children


SHAPES = {
    # a Process of the spawn context whose target fails
    "spawn_process": """
        import multiprocessing as mp
        import json

        def work(text):
            print("child parsing", text, flush=True)
            json.loads(text)

        if __name__ == "__main__":
            p = mp.get_context("spawn").Process(target=work, args=('{"a": 1,}',))
            p.start()
            p.join()
            print("child exit code", p.exitcode)
            raise SystemExit(p.exitcode + 2)
    """,
    # the forkserver start method: the fork server itself is the warm child
    "forkserver_pool": """
        import multiprocessing as mp
        import json

        def work(text):
            return json.loads(text)

        if __name__ == "__main__":
            with mp.get_context("forkserver").Pool(2) as pool:
                print(pool.map(work, ['{"a": 1}', '{"b": 2,}']))
    """,
    "process_pool_executor": """
        import json
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, wait

        def work(text):
            return json.loads(text)

        if __name__ == "__main__":
            with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as ex:
                futures = [ex.submit(work, text) for text in ['{"a": 1}', '{"b": 2,}']]
                wait(futures)   # the traceback's frames do not depend on how fast the workers are
                print([f.result() for f in futures])
    """,
    # a DataLoader whose worker is spawned fails on one item
    "dataloader_spawn": """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Broken(Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, i):
                if i == 2:
                    raise IndexError(f"item {i} is missing")
                return torch.tensor([i])

        if __name__ == "__main__":
            for batch in DataLoader(Broken(), batch_size=1, num_workers=1, multiprocessing_context="spawn"):
                print(batch.tolist())
    """,
    # ranks that import torch, compute, and one of them fails
    "torch_mp_spawn": """
        import os
        import torch
        import torch.multiprocessing as tmp

        def run(rank, world):
            t = torch.arange(4.0) * (rank + 1)
            if rank == 1:
                raise RuntimeError(f"rank {rank} of {world} got {t.sum().item()} cuda={torch.cuda.is_initialized()}")

        if __name__ == "__main__":
            os.environ["MASTER_ADDR"] = "127.0.0.1"
            os.environ["MASTER_PORT"] = "29531"
            tmp.spawn(run, args=(2,), nprocs=2, join=True)
    """,
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_spawned_children_start_warm_and_fail_as_cold_ones_do(tmp_path, name):
    script = write(tmp_path / f"{name}.py", SHAPES[name])
    warm, cold, children = warm_and_cold(script)
    same(warm, cold)
    assert children["warm"] >= 1 and children["cold"] == 0, children
    expected = {"torch_mp_spawn": "RuntimeError", "dataloader_spawn": "IndexError"}.get(name, "JSONDecodeError")
    assert any(expected in r.exc_type for r in warm.tracebacks), warm.stderr
    if name == "spawn_process":
        assert warm.returncode == 3 and "child exit code 1" in warm.stdout
    if name == "dataloader_spawn":
        assert warm.stdout == "[[0]]\n[[1]]\n" and "IndexError: item 2 is missing" in warm.stderr
    if name == "torch_mp_spawn":
        assert "rank 1 of 2 got 12.0 cuda=False" in warm.stderr


def test_a_child_sees_nothing_of_the_parents_state(tmp_path):
    """Spawn's promise: the child re-imports the script as __mp_main__ (module-level code runs
    again, the __main__ block does not) and sees none of what the parent's main block did."""
    script = write(tmp_path / "state.py", """
        import multiprocessing as mp
        import sys

        SETTING = "module level"
        print("module code ran in", __name__, flush=True)

        def work():
            print("child sees", SETTING, __name__, "cache" in globals(), flush=True)
            raise ValueError("child saw " + SETTING)

        if __name__ == "__main__":
            SETTING = "set by the parent's main block"
            cache = [1, 2, 3]
            sys.modules["json"] = None   # even the parent's sys.modules stays behind
            p = mp.get_context("spawn").Process(target=work)
            p.start()
            p.join()
            raise SystemExit(p.exitcode)
    """)
    warm, cold, children = warm_and_cold(script)
    same(warm, cold)
    assert children["warm"] == 1
    assert warm.stdout.splitlines() == ["module code ran in __main__", "module code ran in __mp_main__",
                                        "child sees module level __mp_main__ False"]
    assert "ValueError: child saw module level" in warm.stderr and warm.returncode == 1


def _fake_library(tmp_path: Path) -> dict:
    """A library on the runs' PYTHONPATH that reads FAKEENVLIB_MODE once, as it is imported (as
    torch reads its threading variables, huggingface_hub its offline switch)."""
    site = tmp_path / "site" / "fakeenvlib"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text('import os\nMODE = os.environ.get("FAKEENVLIB_MODE", "default")\n')
    return {"PYTHONPATH": str(site.parent)}


def test_a_change_to_a_variable_a_warm_module_read_at_import_makes_the_child_cold(tmp_path):
    """The parent sets FAKEENVLIB_MODE before spawning; the warm image imported fakeenvlib, which
    read it then, so that child starts cold, and the reason names the variable and the module."""
    script = write(tmp_path / "mode.py", """
        import fakeenvlib
        import os
        import multiprocessing as mp

        def work():
            raise RuntimeError("mode " + fakeenvlib.MODE)

        if __name__ == "__main__":
            os.environ["FAKEENVLIB_MODE"] = "changed"
            p = mp.get_context("spawn").Process(target=work)
            p.start()
            p.join()
    """)
    warm, cold, children = warm_and_cold(script, env=_fake_library(tmp_path))
    same(warm, cold)
    assert "RuntimeError: mode changed" in warm.stderr
    assert children["warm"] == 0 and children["cold"] == 1
    assert children["why_cold"] == ["FAKEENVLIB_MODE changed before the child started, and fakeenvlib read it "
                                    "when imported"]


def test_a_parent_that_changed_variables_nothing_warm_read_still_gets_a_warm_child(tmp_path):
    """Issue #38's parent: it sets OpenMP and tokenizer variables, saves a file and only then starts
    the child. Nothing in the warm image read them as it was imported (no OpenMP runtime is loaded,
    fakeenvlib reads another variable), so the child is warm, sees the parent's values as a spawned
    interpreter would, and fails as the cold run does."""
    script = write(tmp_path / "omp.py", """
        import fakeenvlib
        import os
        import multiprocessing as mp

        def work(path, threads, mode):
            with open(path) as f:
                saved = f.read()
            raise RuntimeError(" ".join([saved, os.environ["OMP_NUM_THREADS"], os.environ["KMP_INIT_AT_FORK"],
                                         os.environ["TOKENIZERS_PARALLELISM"], str(threads), mode]))

        if __name__ == "__main__":
            os.environ["OMP_NUM_THREADS"] = "1"
            os.environ["KMP_INIT_AT_FORK"] = "FALSE"
            os.environ["TOKENIZERS_PARALLELISM"] = "false"
            with open("state.txt", "w") as f:
                f.write("saved")
            p = mp.get_context("spawn").Process(target=work, args=("state.txt", 2, fakeenvlib.MODE))
            p.start()
            p.join()
            raise SystemExit(p.exitcode)
    """)
    warm, cold, children = warm_and_cold(script, env=_fake_library(tmp_path))
    same(warm, cold)
    assert "RuntimeError: saved 1 FALSE false 2 default" in warm.stderr
    assert children["warm"] == 1 and children["cold"] == 0


def test_a_forked_worker_that_spawns_gets_the_real_spawn(tmp_path):
    """A worker started with fork inherits the candidate's wrapped spawn; a child the child
    zygote made would not be that worker's own (it could never wait for it): real spawn."""
    script = write(tmp_path / "nested.py", """
        import multiprocessing as mp

        def leaf():
            raise KeyError("leaf")

        def middle():
            p = mp.get_context("spawn").Process(target=leaf)
            p.start()
            p.join()
            print("leaf exit code", p.exitcode, flush=True)

        if __name__ == "__main__":
            p = mp.get_context("fork").Process(target=middle)
            p.start()
            p.join()
            print("middle exit code", p.exitcode)
    """)
    warm, cold, children = warm_and_cold(script)
    same(warm, cold)
    # (a hang, had the leaf been served warm: the middle worker's join would never return)
    assert "leaf exit code 1" in warm.stdout and "middle exit code 0" in warm.stdout
    assert children["warm"] == 0


TRACED = """
    import multiprocessing as mp
    import sys


    def grandchild_only(n):
        total = n * 3
        return total


    def child_only(n):
        doubled = n * 2
        if doubled > 1000:
            print("never")
        if len(sys.argv) > 1:
            p = mp.get_context("spawn").Process(target=grandchild_only, args=(doubled,))
            p.start()
            p.join()
        return doubled


    def never_called():
        return 0


    if __name__ == "__main__":
        p = mp.get_context("spawn").Process(target=child_only, args=(21,))
        p.start()
        p.join()
        raise ValueError("parent failed")
"""


def _executed(source: str, lines: set[int]) -> set[str]:
    text = source.splitlines()
    return {text[n - 1].strip() for n in lines if 0 < n <= len(text)}


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_the_trace_sees_the_lines_only_a_child_ran(tmp_path, warm):
    script = write(tmp_path / "traced.py", TRACED)
    source = script.read_text()
    runner = runner_for(script, args=("grandchild",))
    try:
        trace = trace_run(source, runner_run_fn(runner, warm=warm or None))
        children = runner.zygotes.children()
    finally:
        runner.zygotes.stop()
    executed = _executed(source, trace.lines)
    assert "doubled = n * 2" in executed and "return doubled" in executed       # the child's
    assert "total = n * 3" in executed                                          # its own child's
    assert 'raise ValueError("parent failed")' in executed                      # the parent's
    assert 'print("never")' not in executed and "return 0" not in executed
    if warm:
        assert children["warm"] >= 1
    # the first cut keeps what only the children ran, and still drops what nobody ran
    first = cut(source, trace.lines, aggressive=True)
    assert "doubled = n * 2" in first and "total = n * 3" in first
    assert "never_called" not in first and 'print("never")' not in first


def test_values_two_processes_bound_differently_are_not_pinned(tmp_path):
    """Module-level code runs again in a spawn child: a name it binds to another value there
    (a pid, a rank) varies, so it is never written into the repro as one literal."""
    script = write(tmp_path / "binds.py", """
        import multiprocessing as mp
        import os

        WHO = os.getpid()
        SAME = 7

        def work():
            print(WHO)

        if __name__ == "__main__":
            p = mp.get_context("spawn").Process(target=work)
            p.start()
            p.join()
            raise ValueError("done")
    """)
    source = script.read_text()
    runner = runner_for(script)
    try:
        trace = trace_run(source, runner_run_fn(runner))
    finally:
        runner.zygotes.stop()
    who = [b for b in trace.binds if b.name == "WHO"]
    assert len(who) == 1 and who[0].varies
    same_ = [b for b in trace.binds if b.name == "SAME"]
    assert len(same_) == 1 and not same_[0].varies and same_[0].value == "7"
    sites = trace.binding_sites()
    assert not any(k[1] == "WHO" for k in sites)


def test_the_warm_check_of_the_original_covers_its_child(tmp_path):
    """The failure is in a spawn child that reads a module the zygote imported with the zygote's
    TMPDIR: warm, the child fails differently. The one warm run of the original shows it, and the
    whole reduction runs cold, said in one line."""
    site = tmp_path / "site"
    (site / "tmpcache").mkdir(parents=True)
    write(site / "tmpcache" / "__init__.py", """
        import os
        TMP = os.environ.get("TMPDIR")
    """)
    work = tmp_path / "work"
    work.mkdir()
    write(work / "stale_child.py", """
        import tmpcache
        import multiprocessing as mp
        import os
        import json

        def child():
            if tmpcache.TMP != os.environ.get("TMPDIR"):
                raise AssertionError("stale temporary directory")
            json.loads("{oops")

        if __name__ == "__main__":
            unused = 1
            p = mp.get_context("spawn").Process(target=child)
            p.start()
            p.join()
    """)
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "stale_child.py", "--out", str(tmp_path / "r"),
                           "--no-env", "--max-time", "200"], cwd=work, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "COLUMNS": "300"},
                          timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("cold runs:")]
    assert len(lines) == 1 and "does not fail the same way when started warm" in lines[0], proc.stdout
    assert "AssertionError: stale temporary directory" in lines[0]
    (folder,) = (tmp_path / "r").iterdir()
    data = json.loads((folder / "reduction.json").read_text())
    assert data["warm"]["enabled"] is False and data["warm"]["runs_warm"] == 1
    assert "json.loads" in (folder / "repro.py").read_text()


def test_a_child_that_fails_only_warm_makes_every_run_cold(tmp_path):
    """The target is the parent's own failure, which shows warm too; but warm, its spawn child
    fails where the cold one did not. Any difference means cold for everything, in one line."""
    site = tmp_path / "site"
    (site / "tmpcache").mkdir(parents=True)
    write(site / "tmpcache" / "__init__.py", """
        import os
        TMP = os.environ.get("TMPDIR")
    """)
    work = tmp_path / "work"
    work.mkdir()
    write(work / "parent_fails.py", """
        import tmpcache
        import multiprocessing as mp
        import os
        import json

        def child():
            if tmpcache.TMP != os.environ.get("TMPDIR"):
                raise AssertionError("stale temporary directory")

        if __name__ == "__main__":
            p = mp.get_context("spawn").Process(target=child)
            p.start()
            p.join()
            json.loads("{oops")
    """)
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "parent_fails.py", "--out", str(tmp_path / "r"),
                           "--no-env", "--no-trace", "--max-time", "200"], cwd=work, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "COLUMNS": "300"},
                          timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("cold runs:")]
    assert lines == ["cold runs: the original fails differently when started warm (also AssertionError: "
                     "stale temporary directory)"], proc.stdout
    (folder,) = (tmp_path / "r").iterdir()
    data = json.loads((folder / "reduction.json").read_text())
    assert data["warm"]["enabled"] is False and data["warm"]["runs_warm"] == 1
    assert data["warm"]["zygote"]["children"]["warm"] == 1


def test_a_thread_count_the_parent_set_reaches_a_warm_child_through_torch(tmp_path):
    """Every DDP job of issue #38's corpus sets OMP_NUM_THREADS before it spawns its ranks, and
    the OpenMP runtime torch loaded read it at load: every child was cold (3x the run time).
    torch's set_num_threads gives the running image that count, so the child is warm and sees
    what a fresh interpreter would. The same for TORCH_DISTRIBUTED_DEBUG, which torch.distributed
    reads as it is imported (a warm child kept the old level and failed otherwise)."""
    script = write(tmp_path / "threads.py", """
        import os
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as tmp

        def rank(i):
            raise RuntimeError(f"rank {i} runs on {torch.get_num_threads()} threads of {os.environ['OMP_NUM_THREADS']}"
                               f" at {dist.get_debug_level()}")

        if __name__ == "__main__":
            os.environ["OMP_NUM_THREADS"] = "1"
            os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
            tmp.spawn(rank, nprocs=1)
    """)
    warm, cold, children = warm_and_cold(script)
    same(warm, cold)
    assert "RuntimeError: rank 0 runs on 1 threads of 1 at DebugLevel.DETAIL" in warm.stderr
    assert children["warm"] == 1 and children["cold"] == 0, children


def test_a_log_level_the_parent_set_reaches_a_warm_child_through_transformers(tmp_path):
    """heldout6's offload worker sets TRANSFORMERS_VERBOSITY before it spawns, and transformers'
    logging read it at import: its children were cold. set_verbosity gives the warm image the
    level a fresh interpreter would read."""
    script = write(tmp_path / "verbosity.py", """
        import os
        import multiprocessing as mp
        import transformers
        from transformers.utils import logging

        def child(q):
            raise RuntimeError(f"level {logging.get_verbosity()} for {os.environ['TRANSFORMERS_VERBOSITY']}")

        if __name__ == "__main__":
            os.environ["TRANSFORMERS_VERBOSITY"] = "error"
            p = mp.get_context("spawn").Process(target=child, args=(None,))
            p.start()
            p.join()
            raise SystemExit(p.exitcode)
    """)
    warm, cold, children = warm_and_cold(script)
    same(warm, cold)
    assert "RuntimeError: level 40 for error" in warm.stderr
    assert children["warm"] == 1 and children["cold"] == 0, children

