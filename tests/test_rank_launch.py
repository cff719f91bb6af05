"""Warm torchrun ranks (reducer/run/rank_launch.py), real runs: gloo on CPU, the ranks forked from a
warm image, compared with the same line run cold by the real torchrun."""
from __future__ import annotations

import os
import re
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from reducer.analysis.trace import runner_run_fn, trace_run
from reducer.failure.oracle import Oracle
from reducer.failure.ranks import PRIMARY, is_collision, role
from reducer.failure.signature import MatchOptions, Signature, distinct_failures
from reducer.run.launch import parse_launch
from reducer.run.rank_launch import RankPlan, warm_plan
from reducer.run.runner import Runner, RunSpec
from reducer.run.zygote import ZygotePool, warm_imports

PY = sys.executable
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
                                reason="torch.distributed with gloo is not available")


def write(path: Path, code: str) -> Path:
    path.write_text(textwrap.dedent(code).lstrip(), encoding="utf-8")
    return path


def test_warm_plan_reads_one_node_lines_and_leaves_the_rest_to_torchrun(tmp_path):
    write(tmp_path / "train.py", "print(1)\n")

    def plan(*opts: str) -> RankPlan | None:
        return warm_plan(parse_launch(["torchrun", *opts, "train.py", "--lr", "3"], tmp_path, PY))

    assert plan("--nproc_per_node", "2", "--master_port", "12355") == RankPlan(2)
    assert plan("--nproc-per-node=4", "--standalone", "--master-addr", "localhost", "--rdzv-id", "job") == \
        RankPlan(4, "localhost", "default", "job")
    assert plan() == RankPlan(1)                                   # torchrun's default: one process
    assert plan("--nnodes", "1", "--node_rank", "0", "--max_restarts", "0", "--nproc_per_node", "2") == RankPlan(2)
    # what only torchrun itself can do
    for opts in (("--nproc_per_node", "auto"), ("--nnodes", "2"), ("--nnodes", "1:4"), ("--max_restarts", "3"),
                 ("--no-python",), ("--redirects", "3"), ("--tee", "3"), ("--node_rank", "1")):
        assert plan(*opts) is None, opts
    assert warm_plan(parse_launch(["python", "-m", "torch.distributed.run", "--nproc_per_node", "2", "train.py"],
                                  tmp_path, PY)) == RankPlan(2)
    # accelerate launch: its options are read at run time by accelerate's own parser
    accelerate = parse_launch(["accelerate", "launch", "--num_processes", "2", "train.py"], tmp_path, PY)
    assert warm_plan(accelerate) == RankPlan(2, accelerate=("--num_processes", "2"))
    for opts in (("--use_deepspeed",), ("--num_machines", "2"), ("--mpirun_hostfile", "h"),
                 ("--num_processes", "auto"), ("--use_fsdp",), ("--max_restarts", "1")):
        line = parse_launch(["accelerate", "launch", *opts, "train.py"], tmp_path, PY)
        assert warm_plan(line) is None, opts


RANKS = """
    import argparse
    import os
    import time

    import torch
    import torch.distributed as dist

    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float)
    a = p.parse_args()
    os.environ.setdefault("MASTER_PORT", "12355")
    dist.init_process_group("gloo")
    t = torch.ones(2) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    env = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")}
    # one write(2) per line: both ranks print at once to one stream, and the runner's
    # PYTHONUNBUFFERED makes print() write the text and its newline apart
    os.write(1, f"rank {dist.get_rank()} sum {t.tolist()} env {env} threads {torch.get_num_threads()}\\n".encode())
    time.sleep(float(os.environ.get("HOLD", "0")))   # concurrent runs hold their rendezvous together
    if dist.get_rank() == 1:
        only_rank_one = f"lr={a.lr} port={os.environ['MASTER_PORT']} world={dist.get_world_size()}"
        raise ValueError(f"rank 1 refuses {only_rank_one}")
    dist.barrier()
"""

LINE = ["torchrun", "--nproc_per_node", "2", "--master_port", "12355", "train.py", "--lr", "3"]


@pytest.fixture(scope="module")
def warm_line(tmp_path_factory):
    """A runner of the torchrun line with a warm image (one zygote for the module's tests)."""
    folder = tmp_path_factory.mktemp("ranks")
    script = write(folder / "train.py", RANKS)
    launch = parse_launch(LINE, folder, PY)
    runner = Runner(RunSpec(script=script, python=PY, args=tuple(launch.args), timeout=120, launch=launch))
    assert runner.launched and runner.rank_plan == RankPlan(2)
    runner.zygotes = ZygotePool(runner.python, warm_imports(script.read_text(), runner.script_dir),
                                runner.base_environment())
    # both zygotes started here: a zygote dies with the THREAD that started it (PR_SET_PDEATHSIG),
    # and the concurrent test's threads end before the next test
    first, second = runner.zygotes.start_one(), runner.zygotes.start_one()
    runner.zygotes.release(first)
    runner.zygotes.release(second)
    try:
        yield runner, script.read_text()
    finally:
        runner.zygotes.stop()


def _primary(outcome):
    return [(sig, rec) for sig, rec in distinct_failures(outcome, MatchOptions()) if role(rec) == PRIMARY]


def test_warm_ranks_fail_as_the_real_torchrun_ranks_do_and_arguments_pass_through(warm_line):
    runner, source = warm_line
    warm = runner.run(source)
    assert runner.warm_runs == 1 and runner.warm_fallbacks == 0
    cold = runner.run(source, warm=False)
    assert "ChildFailedError" in cold.stderr and "torch.distributed.run" not in warm.stderr
    (w_sig, w_rec), = _primary(warm)
    (c_sig, c_rec), = _primary(cold)
    assert w_sig.exc_type == c_sig.exc_type == "ValueError" and w_sig.frames == c_sig.frames
    for rec in (w_rec, c_rec):
        assert "lr=3.0" in rec.message and "world=2" in rec.message       # --lr 3 and the ranks reached the script
        assert "port=12355" not in rec.message                           # each run had a port of its own
        assert rec.origin == "raised"
        assert [f.path for f in rec.frames] == ["train.py"]               # no launcher, runpy or multiprocessing frame
    for out in (warm.stdout, cold.stdout):   # torchrun's worker environment, one OpenMP thread each
        assert "'RANK': '1', 'LOCAL_RANK': '1', 'WORLD_SIZE': '2', 'LOCAL_WORLD_SIZE': '2', 'OMP_NUM_THREADS': '1'" in out
        assert "sum [3.0, 3.0]" in out and "threads 1" in out
    children = runner.zygotes.children()
    assert children["warm"] >= 2 and children["cold"] == 0, children     # both ranks started warm


def test_a_traced_run_of_the_line_sees_the_lines_only_a_rank_ran(warm_line):
    runner, source = warm_line
    data = trace_run(source, runner_run_fn(runner, None))
    rank_one_line = next(i for i, text in enumerate(source.splitlines(), 1) if "only_rank_one =" in text)
    assert rank_one_line in data.lines
    bound = {(b["line"], b["name"]): b for b in data.to_dict()["binds"]}
    assert (rank_one_line, "only_rank_one") in bound


def test_two_warm_candidates_with_the_same_fixed_port_both_reproduce(warm_line):
    runner, source = warm_line
    runner.spec.env["HOLD"] = "2"
    outcomes = [None, None]

    def one(i: int) -> None:
        outcomes[i] = runner.run(source)

    try:
        threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        runner.spec.env.pop("HOLD")
    ports = set()
    for o in outcomes:
        (sig, rec), = _primary(o)
        assert sig.exc_type == "ValueError" and "world=2" in rec.message, o.stderr[-3000:]
        assert not any(is_collision(r) for r in o.tracebacks), o.stderr[-3000:]
        ports.add(rec.message.split("port=")[1].split()[0])
    assert len(ports) == 2                                                # two rendezvous, not one


HANG = """
    import os
    import time

    import torch.distributed as dist

    dist.init_process_group("gloo")
    os.write(1, f"rank {dist.get_rank()} pid {os.getpid()}\\n".encode())  # one write(2): both ranks print at once
    if dist.get_rank() == 1:
        dist.barrier()                 # rank 0 never comes: rank 1 hangs in the collective
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_warm_rank_that_hangs_is_killed_at_the_timeout_and_the_run_counts(warm_line, tmp_path):
    script = write(tmp_path / "hang.py", HANG)
    launch = parse_launch(["torchrun", "--nproc_per_node", "2", "hang.py"], tmp_path, PY)
    runner = Runner(RunSpec(script=script, python=PY, timeout=60, launch=launch))
    runner.zygotes = warm_line[0].zygotes
    oracle = Oracle(runner, Signature("ValueError", "never", ()), MatchOptions(), timeout=12)
    verdict = oracle.test(script.read_text())
    assert runner.warm_runs == 1, (runner.warm_fallbacks, verdict.outcome.stdout[-2000:], verdict.outcome.stderr[-3000:])
    assert verdict.outcome.timed_out and not verdict.interesting
    pids = [int(pid) for pid in re.findall(r"rank \d+ pid (\d+)", verdict.outcome.stdout)]
    assert len(pids) == 2, verdict.outcome.stdout                         # both ranks ran, warm
    assert oracle.runs == 1                                              # a verdict like any other
    assert not any(_alive(pid) for pid in pids)                          # every rank was killed


STOPPED_RANK = """
    import time

    import torch.multiprocessing as mp


    def pick(r):
        return r


    def work(rank):
        pick(rank)
        if rank == 1:
            time.sleep(1)
            raise ValueError("rank 1 fails first")
        time.sleep(120)            # rank 0 is stopped (SIGTERM) by spawn once rank 1 failed


    if __name__ == "__main__":
        mp.spawn(work, nprocs=2)
"""


def test_a_rank_stopped_by_sigterm_still_writes_what_it_recorded(tmp_path):
    script = write(tmp_path / "stopped.py", STOPPED_RANK)
    runner = Runner(RunSpec(script=script, python=PY, timeout=120))
    data = trace_run(script.read_text(), runner_run_fn(runner, False))
    seen = sorted(c.values.get("r") for c in data.calls if c.func == "pick")
    assert seen == ["0", "1"], seen              # rank 0's record too, though it never exited by itself
    assert not any(k[0] == "pick" for k in data.literal_sites())   # so `rank` is pinned to neither


ACCELERATED = """
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from accelerate import Accelerator

    acc = Accelerator()
    os.write(1, f"type {acc.state.distributed_type} cpu {os.environ.get('ACCELERATE_USE_CPU')} "
                f"mp {os.environ.get('ACCELERATE_MIXED_PRECISION')} rank {os.environ.get('RANK')}\\n".encode())
    raise RuntimeError(f"refused on {acc.device}")
"""


def test_an_accelerate_line_runs_warm_with_the_variables_accelerate_gives_its_process(tmp_path):
    # accelerate launch --cpu: one process, started by accelerate's simple launcher with its
    # variables (ACCELERATE_USE_CPU, the precision) and none of torchrun's; a warm run gives the
    # same, read by accelerate's own parser, and fails with the same signature
    pytest.importorskip("accelerate")
    script = write(tmp_path / "train.py", ACCELERATED)
    launch = parse_launch(["accelerate", "launch", "--cpu", "--num_processes", "1", "--mixed_precision", "no",
                           "train.py"], tmp_path, PY)
    runner = Runner(RunSpec(script=script, python=PY, timeout=120, launch=launch))
    assert runner.rank_plan is not None and runner.rank_plan.accelerate is not None
    runner.zygotes = ZygotePool(runner.python, warm_imports(script.read_text(), runner.script_dir),
                                runner.base_environment())
    runner.zygotes.release(runner.zygotes.start_one())
    try:
        source = script.read_text()
        warm = runner.run(source)
        assert runner.warm_runs == 1 and runner.warm_fallbacks == 0
        # the script sets a variable before its imports: its ranks come from an image that ran
        # them with it (leading_environment), not from one that stopped at the setting
        assert "accelerate:Accelerator" in runner.zygotes.info.imported, runner.zygotes.info
        cold = runner.run(source, warm=False)
    finally:
        runner.zygotes.stop()
    assert "accelerate" in " ".join(launch.command(PY, "train.py", None)) and "accelerate.commands" not in warm.stderr
    for out in (warm.stdout, cold.stdout):
        assert "type DistributedType.NO cpu True mp no rank None" in out, out
    (w_sig, _), = _primary(warm)
    (c_sig, _), = _primary(cold)
    assert (w_sig.exc_type, w_sig.frames) == (c_sig.exc_type, c_sig.frames) == ("RuntimeError", c_sig.frames)
    assert w_sig.message == c_sig.message
