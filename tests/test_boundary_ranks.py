"""Issue #38, a rank's failure at the floor: each rank's values of the failing call, written per
rank, and the process group the call ran in set up first.

A DDP job whose ranks build models of different sizes fails in one rank; the boundary call written
from that rank alone gives every rank the same model and fails no more, and without the process
group it fails another way. The launcher records the same call as every rank entered it (a
rank that only waits in a collective may be killed before it raises), and the candidate writes
the values that differ as ``(r0, r1)[rank]`` after ``init_process_group``."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from reducer.analysis.boundary import Boundary, boundary_run, peer_calls
from reducer.passes.boundary import _merge_nodes, candidates

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

FAKELIB = '''\
class Net:
    def __init__(self, width, depth=1):
        self.width, self.depth = width, depth


def join(net, group="world"):
    import os
    if os.environ.get("RANK") == "1":
        raise RuntimeError("width %d does not match the other rank" % net.width)
'''

JOB = '''\
import os
import fakelib

WIDTHS = {"0": 8, "1": 9}


def main():
    rank = os.environ.get("RANK", "0")
    net = fakelib.Net(WIDTHS[rank], depth=2)
    fakelib.join(net, group="world")


main()
'''


def _two_ranks(folder: Path):
    """A launched job of two ranks, as a launch line runs one: every rank the same script, RANK
    and WORLD_SIZE set; rank 0 never fails here, so only a watched call records its values."""
    def run(source: str, launcher: list[str], env: dict[str, str]) -> None:
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(folder / "fakelib", Path(d) / "fakelib")
            (Path(d) / "job.py").write_text(source, encoding="utf-8")
            for rank in ("0", "1"):
                subprocess.run([PY, *launcher, "job.py"], cwd=d, capture_output=True, timeout=60,
                               env={**os.environ, **env, "RANK": rank, "WORLD_SIZE": "2", "PYTHONPATH": d})
    return run


def _fake(tmp_path: Path) -> Path:
    (tmp_path / "fakelib").mkdir()
    (tmp_path / "fakelib" / "__init__.py").write_text(FAKELIB, encoding="utf-8")
    return tmp_path


def test_every_rank_records_the_failing_call_and_the_candidate_writes_it_per_rank(tmp_path):
    records = boundary_run(JOB, _two_ranks(_fake(tmp_path)))
    failed = [b for b in records if not b.entry]
    assert [(b.rank, b.exc_type) for b in failed] == [(1, "builtins.RuntimeError")]
    # the second run watched that call: both ranks as they entered it
    assert sorted(b.rank for b in records if b.entry) == [0, 1]
    first = candidates(JOB, records, lambda expr, values: True)[0]
    assert "fakelib.Net((8, 9)[int(os.environ['RANK'])], depth=2)" in first
    # it runs as the job ran: rank 1 fails with the original's message, rank 0 builds its own width
    with tempfile.TemporaryDirectory() as d:
        shutil.copytree(tmp_path / "fakelib", Path(d) / "fakelib")
        (Path(d) / "c.py").write_text(first, encoding="utf-8")
        ends = [subprocess.run([PY, "c.py"], cwd=d, capture_output=True, text=True, timeout=60,
                               env={**os.environ, "RANK": r, "WORLD_SIZE": "2", "PYTHONPATH": d})
                for r in ("0", "1")]
    assert ends[0].returncode == 0
    assert "width 9 does not match the other rank" in ends[1].stderr


def test_no_watch_run_outside_a_launched_job(tmp_path):
    _fake(tmp_path)
    runs: list[dict] = []

    def run(source, launcher, env):
        runs.append(env)
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(tmp_path / "fakelib", Path(d) / "fakelib")
            (Path(d) / "job.py").write_text(source.replace('os.environ.get("RANK", "0")', '"1"'), encoding="utf-8")
            subprocess.run([PY, *launcher, "job.py"], cwd=d, capture_output=True, timeout=60,
                           env={**os.environ, **env, "RANK": "1", "PYTHONPATH": d})
    records = boundary_run(JOB, run)
    assert len(runs) == 1 and records and all(b.rank is None and not b.entry for b in records)


def _record(rank: int | None, width: int, *, entry: bool = False, state: dict | None = None) -> Boundary:
    return Boundary.from_dict({
        "line": 10, "func": "main", "exc_type": "" if entry else "builtins.RuntimeError",
        "message": "" if entry else "width 9 does not match", "entry": entry, "rank": rank,
        "state": state, "values": {"fakelib.join": {"object": "fakelib:join"}},
        "callee": {"name": "join", "params": [
            ["net", {"type": "fakelib:Net", "recipe": {"expr": f"fakelib.Net({width})",
                                                      "imports": ["import fakelib"], "setup": []}}],
            ["group", {"value": "'world'", "default": True}]]}})


def test_a_rank_not_seen_leaves_the_failing_ranks_call_alone():
    both = candidates(JOB, [_record(1, 9), _record(0, 8, entry=True)], lambda e, v: True)[0]
    assert "fakelib.Net((8, 9)[int(os.environ['RANK'])])" in both and "import os" in both
    # ranks 1 and 2 seen of a job of three: no tuple to index, the failing rank's values alone
    alone = candidates(JOB, [_record(1, 9), _record(2, 8, entry=True)], lambda e, v: True)[0]
    assert "fakelib.Net(9)" in alone and "RANK" not in alone
    # equal values in every rank: nothing per rank
    same = candidates(JOB, [_record(1, 9), _record(0, 9, entry=True)], lambda e, v: True)[0]
    assert "fakelib.Net(9)" in same and "RANK" not in same


def test_the_process_group_is_set_up_before_the_call_and_gives_the_rank():
    state = {"imports": ["import torch.distributed as dist"], "setup": ["dist.init_process_group('gloo')"],
             "rank": {"expr": "dist.get_rank()", "imports": ["import torch.distributed as dist"]}}
    first = candidates(JOB, [_record(1, 9, state=state), _record(0, 8, entry=True, state=state)],
                       lambda e, v: True)[0]
    lines = first.splitlines()
    assert lines.index("dist.init_process_group('gloo')") < next(i for i, l in enumerate(lines) if "join(" in l)
    assert "fakelib.Net((8, 9)[dist.get_rank()])" in first
    assert "import torch.distributed as dist" in lines


def test_ranks_differ_at_the_smallest_node():
    index = ast.parse("r", mode="eval").body
    merged = _merge_nodes([ast.parse(t, mode="eval").body for t in
                           ("M(C(vocab=26, n=2), bias=True)", "M(C(vocab=22, n=2), bias=True)")], index)
    assert ast.unparse(merged) == "M(C(vocab=(26, 22)[r], n=2), bias=True)"
    # a different shape (another keyword) is written whole per rank, at the call that differs
    merged = _merge_nodes([ast.parse(t, mode="eval").body for t in ("M(C(vocab=26))", "M(C(vocab=26, n=1))")], index)
    assert ast.unparse(merged) == "M((C(vocab=26), C(vocab=26, n=1))[r])"


def test_only_a_ranks_failure_without_its_peers_is_watched():
    assert peer_calls([_record(1, 9)]) == "10:join"
    assert peer_calls([_record(1, 9), _record(0, 8)]) == ""            # rank 0 failed there too
    assert peer_calls([_record(None, 9)]) == ""                         # not a launched job


torch = pytest.importorskip("torch")
needs_gloo = pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
                                reason="torch.distributed with gloo is not available")

DDP_SCRIPT = '''\
"""Two ranks, each sizing its output layer from the labels in its own shard."""
import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

LABELS = ["cat", "dog", "bird", "dog", "cat", "dog"]


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--hidden", type=int, default=6)
    p.add_argument("--backend", default="gloo")
    return p.parse_args()


def shard(items, rank, world):
    return items[rank::world]


def build(hidden, classes):
    return nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def main():
    args = parse_args()
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    classes = sorted(set(shard(LABELS, rank, world)))
    print(f"rank {rank}: {len(classes)} classes")
    model = DDP(build(args.hidden, len(classes)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = model(torch.randn(3, 4)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''


def _through_torchrun(tmp_path: Path, source: str):
    """(the runner of ``torchrun --nproc_per_node 2 train.py``, the boundary records of its run),
    as a reduction gets them: the failing rank's record, the watched run, pytorch's process_state."""
    from bot.targets.registry import recipe_files
    from reducer.analysis.trace import runner_run_fn
    from reducer.run.launch import parse_launch
    from reducer.run.runner import Runner, RunSpec
    script = tmp_path / "train.py"
    script.write_text(source, encoding="utf-8")
    launch = parse_launch(["torchrun", "--nproc_per_node", "2", "train.py"], tmp_path, PY)
    runner = Runner(RunSpec(script=script, python=PY, timeout=180, launch=launch))
    return runner, boundary_run(source, runner_run_fn(runner), recipe_files())


@needs_gloo
def test_a_ddp_job_whose_ranks_build_other_sizes_gets_the_per_rank_call(tmp_path):
    # the first candidate then fails the same way under the same line
    runner, records = _through_torchrun(tmp_path, DDP_SCRIPT)
    # rank 0's values come from its own failure (the peer closed) or, when torchrun stopped it
    # first, from the watched run: either way both ranks are there
    assert {b.rank for b in records} == {0, 1}
    first = candidates(DDP_SCRIPT, records, lambda expr, values: True)[0]
    assert len(ast.parse(first).body) <= 6, first    # the floor: 3 imports, the group, the per-rank call
    assert "dist.init_process_group('gloo')" in first and "[dist.get_rank()]" in first, first
    ran = runner.run(first)
    assert "appears not to match sizes of the same param in process 0" in ran.stderr, ran.stderr[-2000:]

CTOR_LIB = '''\
class Net:
    def __init__(self, width):
        self.width = width


class Wrapper:
    def __init__(self, module, bucket=25):
        raise RuntimeError("module of width %d cannot be wrapped" % module.width)
'''

CTOR_JOB = '''\
from fakelib import Net, Wrapper as W


def build(n):
    return Net(n * 3)


W(build(2), bucket=10)
'''


def test_a_constructor_called_through_an_alias_is_written_from_what_its_init_received(tmp_path):
    # the failing line entered Wrapper.__init__, spelled ``W(...)``: its module argument is a call
    # (never run again), so it is written from what __init__ received
    (tmp_path / "fakelib").mkdir()
    (tmp_path / "fakelib" / "__init__.py").write_text(CTOR_LIB, encoding="utf-8")

    def run(source, launcher, env):
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(tmp_path / "fakelib", Path(d) / "fakelib")
            (Path(d) / "job.py").write_text(source, encoding="utf-8")
            subprocess.run([PY, *launcher, "job.py"], cwd=d, capture_output=True, timeout=60,
                           env={**os.environ, **env, "PYTHONPATH": d})
    first = candidates(CTOR_JOB, boundary_run(CTOR_JOB, run), lambda e, v: True)[0]
    assert "W(Net(6), bucket=10)" in first and "def build" not in first, first


RANK_ALONE = '''\
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    width = 6 if dist.get_rank() == 0 else 5       # rank 1's features come out one short
    model = DDP(torch.nn.Linear(6, 2))
    model(torch.ones(3, width))
    dist.destroy_process_group()


main()
'''


@needs_gloo
def test_a_rank_failing_alone_in_its_models_forward_is_called_on_the_module_ddp_wraps(tmp_path):
    # heldout8's CLIP ranks: the module's forward fails in rank 1 of two; DDP's forward frames are
    # wrappers in a signature, so the module stands for the wrapper in a group of several too
    runner, records = _through_torchrun(tmp_path, RANK_ALONE)
    first = candidates(RANK_ALONE, records, lambda expr, values: True)[0]
    assert "DDP" not in first and "torch.nn.Linear(in_features=6, out_features=2, bias=True)(" in first, first
    ran = runner.run(first)
    assert "mat1 and mat2 shapes cannot be multiplied (3x5 and 6x2)" in ran.stderr, ran.stderr[-2000:]


SPAWNED_RANKS = '''\
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

LABELS = ["a", "b", "c", "a", "b"]


def worker(rank, world, hidden):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29517"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    classes = sorted(set(LABELS[rank::world]))
    model = DDP(torch.nn.Linear(hidden, len(classes)))
    model(torch.ones(2, hidden)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--hidden", type=int, default=4)
    args = p.parse_args()
    mp.spawn(worker, args=(args.world, args.hidden), nprocs=args.world)
'''


@needs_gloo
def test_ranks_the_script_spawned_itself_are_started_by_the_candidate(tmp_path):
    # no launcher to run a per-rank call again (ranks and world size are mp.spawn's arguments), so
    # the candidate starts its ranks itself: the group and the per-rank call in a rank function,
    # forked twice; it fails the way the job did, in the parent's run
    from bot.targets.registry import recipe_files
    from reducer.analysis.trace import runner_run_fn
    from reducer.run.runner import Runner, RunSpec
    script = tmp_path / "job.py"
    script.write_text(SPAWNED_RANKS, encoding="utf-8")
    runner = Runner(RunSpec(script=script, python=PY, timeout=180))
    records = boundary_run(SPAWNED_RANKS, runner_run_fn(runner), recipe_files())
    # each rank's record (rank 0's from its own failure or the watched run) beside the parent's
    assert {b.rank for b in records if b.child} == {0, 1}, records
    first = candidates(SPAWNED_RANKS, records, lambda expr, values: True)[0]
    tree = ast.parse(first)
    assert [type(n).__name__ for n in tree.body][-2:] == ["FunctionDef", "Expr"], first
    assert "start_processes(run_rank, nprocs=2, start_method='fork')" in first, first
    assert "rank=rank, world_size=2" in first and "out_features=(3, 2)[rank]" in first, first
    assert "argparse" not in first and "LABELS" not in first, first
    ran = runner.run(first)
    assert "appears not to match sizes of the same param in process 0" in ran.stderr, ran.stderr[-2000:]


def test_a_rank_the_script_started_needs_a_whole_call():
    # the rank's function cannot hold a slice of the script's own code: no candidate then
    b = Boundary(7, "worker", "builtins.RuntimeError", "mismatch", {"net": {"object": "Net"}},
                 {"name": "join", "params": [["net", {"object": "Net"}]]}, True, [], 1,
                 {"imports": ["import torch.distributed as dist"], "setup": ["dist.init_process_group('gloo', "
                  "init_method='tcp://127.0.0.1:29500', rank=rank, world_size=2)"], "rank": {"expr": "rank"},
                  "start": {"param": "rank", "imports": [], "call": "go({target})"}})
    source = "import lib\n\n\ndef worker(rank):\n    net = lib.Net()\n    lib.prepare()\n    lib.join(net)\n"
    assert not any("def run_rank" in c for c in candidates(source, [b], lambda e, v: True))


@pytest.mark.slow
@needs_gloo
def test_a_spawned_job_that_needs_its_peer_reduces_to_its_ranks_started_by_the_repro(tmp_path):
    # the whole reduction, warm: the boundary candidate forks its two ranks, and its memory is the
    # job's, not the warm original's first sample (warm_start.warm_memory_cap); the repro keeps
    # the per-rank call and the group, and nothing of argparse, the labels or the backward
    from reducer.analysis.size import count_statements
    script = tmp_path / "job.py"
    script.write_text(SPAWNED_RANKS, encoding="utf-8")
    proc = subprocess.run([PY, "-m", "bot", "reduce", str(script), "--out", str(tmp_path / "out"), "--jobs", "2",
                           "--max-time", "150", "--no-env", "--json", "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 14), proc.stderr[-3000:]
    repro = next((tmp_path / "out").glob("*/repro.py")).read_text(encoding="utf-8")
    assert "start_method='fork'" in repro and "[rank]" in repro, repro
    assert "argparse" not in repro and "backward" not in repro, repro
    assert count_statements(repro) <= 7, repro


NESTED_LIB = '''\
class Net:
    def __init__(self, width):
        self.width = width


class Wrapper:
    def __init__(self, net, bucket=25):
        import os
        if os.environ.get("RANK") == "1":
            raise RuntimeError("width %d does not match the other rank" % net.width)
'''

NESTED_JOB = '''\
import os
import fakelib

WIDTHS = {"0": 8, "1": 9}
fakelib.Wrapper(fakelib.Net(WIDTHS[os.environ["RANK"]]), bucket=5)
'''


def test_the_watch_of_a_constructor_is_its_own_classes_not_the_first_init_on_its_line(tmp_path):
    # Wrapper(Net(...)) enters Net.__init__ first: watched by name alone ("__init__") the other
    # rank's record was Net's, and no per-rank call could be written from it
    if sys.version_info < (3, 11):
        pytest.skip("co_qualname is 3.11's")
    (tmp_path / "fakelib").mkdir()
    (tmp_path / "fakelib" / "__init__.py").write_text(NESTED_LIB, encoding="utf-8")
    records = boundary_run(NESTED_JOB, _two_ranks(tmp_path))
    watched = [b for b in records if b.entry]
    assert watched and {b.callee.get("qualname") for b in watched} == {"Wrapper.__init__"}, watched
    first = candidates(NESTED_JOB, records, lambda expr, values: True)[0]
    assert "fakelib.Net((8, 9)[int(os.environ['RANK'])])" in first, first
