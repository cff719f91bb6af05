"""Issue 29: the right process's failure, a rendezvous of its own for every run, launch lines.

Real subprocesses throughout: mp.spawn, torchrun, accelerate launch and ProcessPoolExecutor
scripts are run, their output parsed, and the target (or the run's verdict) checked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from reducer.errors import ReprobotError
from reducer.failure.oracle import Oracle
from reducer.failure.original import FailureSpec, find_failure
from reducer.failure.outcome import Frame, Outcome, TracebackRecord
from reducer.failure.ranks import PRIMARY, SECONDARY, WRAPPER, is_collision, role
from reducer.failure.signature import MatchOptions, distinct_failures, library_frames
from reducer.run.launch import ACCELERATE, MODULE, TORCHRUN, parse_launch
from reducer.run.runner import Runner, RunSpec

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

torch = pytest.importorskip("torch")
HAS_GLOO = torch.distributed.is_available() and torch.distributed.is_gloo_available()
needs_gloo = pytest.mark.skipif(not HAS_GLOO, reason="torch.distributed with gloo is not available")


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _failure(script: Path, launch=None, args=(), timeout=180.0):
    spec = FailureSpec(script=script, source=script.read_text(encoding="utf-8"), python=PY,
                       args=tuple(args), runs=1, timeout=timeout, launch=launch)
    return find_failure(spec)


def _cli(cwd: Path, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([PY, "-m", "bot", "reduce", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


# ------------------------------------------------------------------ the child's failure is the target

SPAWN_CHILD = '''\
import torch.multiprocessing as mp
import urllib.parse


def work(rank):
    if rank == 1:
        urllib.parse.urljoin("http://[fe80::1/simple/", "numpy/")


if __name__ == "__main__":
    mp.spawn(work, nprocs=2)
'''


def test_spawn_target_is_the_childs_error_not_the_parents_wrapper(tmp_path):
    failure = _failure(_write(tmp_path / "spawned.py", SPAWN_CHILD))
    sig = failure.signature
    assert sig.exc_type == "ValueError" and "Invalid IPv6 URL" in (sig.message or "")
    assert any(f.func == "_wrap" and "spawn.py" in f.path for f in failure.record.frames)  # the child's traceback
    # the parent's ProcessRaisedException (empty message) was seen, and listed last
    kinds = [s.exc_type for s, _ in failure.choices]
    assert kinds[-1].endswith("ProcessRaisedException"), kinds


EXECUTOR_CHILD = '''\
import concurrent.futures as cf
import json


def parse(text):
    return json.loads(text)


if __name__ == "__main__":
    with cf.ProcessPoolExecutor(2) as pool:
        print(list(pool.map(parse, ['{"a": 1}', '{"a" 1}'])))
'''


def test_process_pool_target_is_the_workers_traceback(tmp_path):
    failure = _failure(_write(tmp_path / "pooled.py", EXECUTOR_CHILD))
    assert failure.signature.exc_type == "json.decoder.JSONDecodeError"
    # the worker's frames (json's), not the parent's re-raise in concurrent/futures/_base.py
    assert failure.signature.frames[0] == "json/decoder.py:raw_decode"
    assert not any("_base.py" in f for f in failure.signature.frames)
    assert any(f.func == "_process_worker" for f in failure.record.frames)


BROKEN_POOL = '''\
import concurrent.futures as cf
import os


def die(_):
    os._exit(3)


if __name__ == "__main__":
    with cf.ProcessPoolExecutor(1) as pool:
        pool.submit(die, 1).result()
'''


def test_a_parent_wrapper_alone_is_refused_as_a_target(tmp_path):
    with pytest.raises(ReprobotError) as err:
        _failure(_write(tmp_path / "broken.py", BROKEN_POOL))
    assert "BrokenProcessPool" in err.value.message
    assert "child" in err.value.message


def _record(exc_type: str, message: str = "", frames=(), chain=()) -> TracebackRecord:
    return TracebackRecord(exc_type, message, tuple(frames), f"{exc_type}: {message}", chain=tuple(chain))


def test_roles_and_order_wrapper_last_secondary_after_primary():
    lib = "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py"
    peer = _record("RuntimeError", "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
                   "[127.0.0.1]:4410", [Frame(lib, 10, "forward")])
    backend = _record("torch.distributed.DistBackendError", "NCCL error in: ...", [Frame(lib, 12, "forward")])
    wrapper = _record("torch.multiprocessing.spawn.ProcessRaisedException", "")
    child = _record("RuntimeError", "Expected to have finished reduction in the prior iteration",
                    [Frame(lib, 1775, "_pre_forward")])
    assert [role(r) for r in (peer, backend, wrapper, child)] == [SECONDARY, SECONDARY, WRAPPER, PRIMARY]
    outcome = Outcome(returncode=1, wall_time=1.0, tracebacks=[wrapper, peer, backend, child])
    order = [r for _, r in distinct_failures(outcome, MatchOptions())]
    assert order == [child, peer, backend, wrapper]
    assert is_collision(_record("RuntimeError", "The server socket has failed to listen on any local network "
                                "address. port: 12355, useIpv6: false, code: -98, name: EADDRINUSE, "
                                "message: address already in use"))
    assert not is_collision(child)


def test_a_launchers_called_process_error_is_a_wrapper():
    # `accelerate launch --num_processes 1` runs the script as a subprocess and raises
    # CalledProcessError when it exits non-zero: that says nothing of the script's own error
    # (an argparse exit prints no traceback at all), so it must never become the target.
    launcher = "/venv/lib/python3.11/site-packages/accelerate/commands/launch.py"
    called = _record("subprocess.CalledProcessError", "Command '['python', 'train.py']' returned non-zero "
                     "exit status 2.", [Frame(launcher, 1200, "launch_command"), Frame(launcher, 1170, "simple_launcher")])
    assert role(called) == WRAPPER
    user = _record("subprocess.CalledProcessError", "Command '['make']' returned non-zero exit status 2.",
                   [Frame("/usr/lib/python3.11/subprocess.py", 571, "run")])
    assert role(user) == PRIMARY


def test_a_dataloaders_re_raise_of_its_workers_error_is_a_wrapper():
    # The parent's "Caught X in DataLoader worker process N." has the parent's iteration frames;
    # the worker's own traceback (quoted after it) is the failure, and with num_workers=0 the
    # same error is raised without the re-raise.
    torch_utils = "/venv/lib/python3.11/site-packages/torch/_utils.py"
    loader = "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py"
    caught = _record("Exception", "Caught Exception in DataLoader worker process 0.",
                     [Frame(loader, 1500, "_next_data"), Frame(loader, 1550, "_process_data"),
                      Frame(torch_utils, 750, "reraise")])
    assert role(caught) == WRAPPER


# ------------------------------------------------------------------ launch lines

ARGS_SCRIPT = '''\
import argparse
import os

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float)
a = p.parse_args()
if os.environ.get("RANK") == "1":
    raise ValueError(f"rank 1 refuses lr={a.lr} on port {os.environ.get('MASTER_PORT')}")
'''


@needs_gloo
def test_torchrun_line_target_is_a_ranks_error_and_args_pass_through(tmp_path):
    _write(tmp_path / "train.py", ARGS_SCRIPT)
    launch = parse_launch(["torchrun", "--nproc_per_node", "2", "--master_port", "12355", "train.py",
                           "--lr", "3"], tmp_path, PY)
    assert launch.kind == TORCHRUN and launch.args == ["--lr", "3"]
    failure = _failure(launch.script, launch, launch.args)
    assert failure.signature.exc_type == "ValueError"
    assert "lr=3.0" in failure.record.message                  # --lr 3 reached the script
    assert "port 12355" not in failure.record.message          # the run had a port of its own
    assert "ChildFailedError" in failure.outcomes[0].stderr     # torchrun's wrapper was there, not chosen


@needs_gloo
def test_accelerate_launch_line_passes_arguments(tmp_path):
    pytest.importorskip("accelerate")
    _write(tmp_path / "train.py", ARGS_SCRIPT)
    launch = parse_launch(["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "train.py",
                           "--lr", "3"], tmp_path, PY)
    assert launch.kind == ACCELERATE
    cmd = launch.command(PY, "train.py", 23456)
    assert cmd[cmd.index("--main_process_port") + 1] == "23456" and cmd[-3:] == ["train.py", "--lr", "3"]
    failure = _failure(launch.script, launch, launch.args)
    assert failure.signature.exc_type == "ValueError" and "lr=3.0" in failure.record.message


def test_launch_line_parsing_and_port_rewrite(tmp_path):
    _write(tmp_path / "train.py", "print(1)\n")
    _write(tmp_path / "pkg" / "__init__.py", "")
    _write(tmp_path / "pkg" / "mod.py", "raise ValueError('x')\n")
    line = parse_launch(["torchrun", "--nproc-per-node=2", "--rdzv-endpoint", "h:29400", "train.py", "-x", "1"],
                        tmp_path, PY)
    cmd = line.command("/py", "train.py", 31000)
    assert cmd[:3] == ["/py", "-m", "torch.distributed.run"]
    assert "h:31000" in cmd and cmd[cmd.index("--master_port") + 1] == "31000"
    assert cmd[-3:] == ["train.py", "-x", "1"]
    assert "--master_port" not in parse_launch(["torchrun", "--standalone", "train.py"], tmp_path, PY) \
        .command("/py", "train.py", 31000)
    mod = parse_launch(["python", "-m", "pkg.mod", "--lr", "3"], tmp_path, PY)
    assert mod.kind == MODULE and mod.relpath == "pkg/mod.py" and mod.args == ["--lr", "3"]
    assert mod.command("/py", "pkg/mod.py", None) == ["/py", "-m", "pkg.mod", "--lr", "3"]
    assert mod.to_dict()["run"] == ["python", "-m", "pkg.mod", "--lr", "3"]
    assert line.to_dict()["run"][-3:] == ["train.py", "-x", "1"]
    plain = parse_launch(["python", "train.py", "--lr", "3"], tmp_path, PY)
    assert not plain.needs_launcher and plain.args == ["--lr", "3"]


def test_cli_python_m_line_reduces_the_modules_file(tmp_path):
    _write(tmp_path / "pkg" / "__init__.py", "")
    _write(tmp_path / "pkg" / "helpers.py", "def parse(s):\n    import json\n    return json.loads(s)\n")
    _write(tmp_path / "pkg" / "mod.py", "import sys\nfrom .helpers import parse\nunused = 1\n"
                                        "print(parse(sys.argv[1]))\n")
    proc = _cli(tmp_path, "--no-env", "--runs", "1", "--cold", "--", "python", "-m", "pkg.mod", "{bad")
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    folder = next((tmp_path / "repros").iterdir())
    sig = json.loads((folder / "signature.json").read_text())
    assert sig["script"] == "pkg/mod.py" and sig["args"] == ["{bad"]
    assert sig["launch"]["run"] == ["python", "-m", "pkg.mod", "{bad"]
    assert sig["signature"]["exc_type"] == "json.decoder.JSONDecodeError"
    repro = (folder / "repro.py").read_text()
    assert "unused" not in repro and "from .helpers import parse" in repro   # reduced, still a package module
    from bot.issue.draft import _command
    assert _command(sig, sig["script"]) == "python -m pkg.mod '{bad'"


# ------------------------------------------------------------------ a rendezvous of its own

FIXED_PORT = '''\
import os
import time

import torch.distributed as dist
import torch.multiprocessing as mp


def work(rank):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "12355"
    dist.init_process_group("gloo", {init}rank=rank, world_size=2)
    dist.barrier()
    time.sleep(3)          # both runs hold their rendezvous at the same time
    dist.barrier()
    raise ValueError("the real failure of rank %d" % rank)


if __name__ == "__main__":
    mp.spawn(work, nprocs=2)
'''


@needs_gloo
@pytest.mark.parametrize("init", ["", "init_method='tcp://127.0.0.1:12355', "], ids=["env", "tcp"])
def test_concurrent_runs_of_a_fixed_port_script_never_collide(tmp_path, init):
    script = _write(tmp_path / "fixed.py", FIXED_PORT.replace("{init}", init))
    runner = Runner(RunSpec(script=script, python=PY, timeout=180))
    assert runner.spec.rendezvous
    outcomes: list[Outcome] = [None, None]  # type: ignore[list-item]

    def one(i: int) -> None:
        outcomes[i] = runner.run(script.read_text(), timeout=180)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o in outcomes:
        messages = [r.message for r in o.tracebacks]
        assert any("the real failure of rank" in m for m in messages), o.stderr[-3000:]
        assert not any(is_collision(r) for r in o.tracebacks), o.stderr[-3000:]
        assert "address already in use" not in o.stderr.lower()


# ------------------------------------------------------------------ a hanging rank

HANGING_RANK = '''\
import logging
import os
import time

import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    try:
        {}["missing-key-{token}"]
    except KeyError:
        logging.exception("rank 1 failed")
    dist.barrier()             # rank 0 never joins: rank 1 hangs in the collective
else:
    time.sleep(600)
'''


def _processes_with(token: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if token.encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


@needs_gloo
def test_a_hanging_rank_is_killed_and_the_run_is_a_timeout_not_a_match(tmp_path):
    token = f"hang{os.getpid()}"
    script = _write(tmp_path / "hang.py", HANGING_RANK.replace("{token}", token))
    launch = parse_launch(["torchrun", "--nproc_per_node", "2", "hang.py", token], tmp_path, PY)
    runner = Runner(RunSpec(script=script, python=PY, timeout=60, launch=launch))
    # the target: the KeyError rank 1 logs before it hangs
    from reducer.failure.signature import Signature
    target = Signature("KeyError", f"'missing-key-{token}'", ())
    oracle = Oracle(runner, target, MatchOptions(), timeout=25, stop_early=False)
    verdict = oracle.test(script.read_text(), warm=False)
    assert verdict.outcome.timed_out
    assert any(r.exc_type == "KeyError" for r in verdict.outcome.tracebacks)   # it did show the failure
    assert not verdict.interesting                                            # but a hang is no match
    assert oracle.runs == 1                                                   # a verdict like any other
    assert _processes_with(token) == []                                       # every rank was killed


COLLIDES = '''\
import logging
import socket
import sys

try:
    socket.socket().bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    logging.exception("rendezvous")      # OSError: [Errno 98] Address already in use
raise ValueError("the real failure")
'''


def test_a_collision_is_never_a_match_and_the_candidate_runs_again(tmp_path):
    import socket
    from reducer.failure.oracle import COLLISION_RETRIES
    from reducer.failure.signature import Signature
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    script = _write(tmp_path / "collides.py", COLLIDES)
    runner = Runner(RunSpec(script=script, python=PY, args=(str(held.getsockname()[1]),), timeout=60))
    oracle = Oracle(runner, Signature("ValueError", "the real failure", ()), MatchOptions(), timeout=30)
    try:
        verdict = oracle.test(COLLIDES, warm=False)
        assert any(is_collision(r) for r in verdict.outcome.tracebacks)           # the port was taken...
        assert any(r.message == "the real failure" for r in verdict.outcome.tracebacks)  # ...and the target shown
        assert not verdict.interesting                                           # never a match
        assert oracle.collisions == COLLISION_RETRIES + 1 and oracle.runs == 1   # run again, one verdict
    finally:
        held.close()
    assert oracle.test(COLLIDES, warm=False).interesting                         # once free, it is the failure


NO_PORT = '''\
import os
import torch.distributed as dist

os.environ["MASTER_ADDR"] = "127.0.0.1"
{port}dist.init_process_group("gloo", rank=0, world_size=1)
print("rendezvous on", os.environ["MASTER_PORT"])
'''


@needs_gloo
def test_a_run_gives_no_master_port_to_a_script_that_sets_none(tmp_path, monkeypatch):
    """Without its own ``MASTER_PORT`` line a script fails for a maintainer: it must fail here too,
    or the reduction would drop the line; with it, the run's port is used, not the script's."""
    monkeypatch.delenv("MASTER_PORT", raising=False)
    script = _write(tmp_path / "port.py", NO_PORT.replace("{port}", ""))
    runner = Runner(RunSpec(script=script, python=PY, timeout=120))
    assert runner.spec.rendezvous
    without = runner.run(script.read_text())
    assert any("MASTER_PORT" in r.message for r in without.tracebacks), without.stderr[-2000:]
    with_line = runner.run(NO_PORT.replace("{port}", 'os.environ["MASTER_PORT"] = "12355"\n'))
    assert with_line.returncode == 0, with_line.stderr[-2000:]
    port = with_line.stdout.split("rendezvous on")[1].split()[0]
    assert port != "12355" and port.isdigit()
    monkeypatch.setenv("MASTER_PORT", "12355")      # exported by the user: the run's port replaces it
    exported = runner.run(script.read_text())
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert exported.stdout.split("rendezvous on")[1].split()[0] != "12355"


def test_run_time_patch_gives_the_script_the_runs_port_and_file(tmp_path):
    """In an interpreter of a run, the script's own MASTER_PORT and init_method give way to the run's."""
    from reducer.run.raised import HOOK_DIR
    probe = ('import os, reprobot_rendezvous as r\n'
             'os.environ["MASTER_PORT"] = "12355"\n'
             'os.environ.setdefault("MASTER_PORT", "29500")\n'
             'print(os.environ["MASTER_PORT"])\n'
             'os.environ["MASTER_PORT"] = ""\n'
             'print(repr(os.environ["MASTER_PORT"]))\n'
             'os.environ["MASTER_PORT"] = "80"\n'
             'print(os.environ["MASTER_PORT"])\n'
             'print(r._rewrite("tcp://localhost:12355?world_size=2"))\n'
             'print(r._rewrite("tcp://[::1]:12355"))\n'
             'print(r._rewrite("file:///tmp/shared_init"))\n'
             'print(r._rewrite("file://"))\n'
             'print(r._rewrite("tcp://127.0.0.1:0"))\n'
             'print(r._rewrite("file://r"))\n'
             'print(r._rewrite("file:///no/such/folder/rdzv"))\n'
             'print(r._rewrite("file://reprobot_scratch/rendezvous"))\n'
             'print(r._rewrite("file://localhost/tmp/shared_init"))\n')
    env = dict(os.environ, PYTHONPATH=str(HOOK_DIR), REPROBOT_RENDEZVOUS="1", REPROBOT_MASTER_PORT="23456",
               TMPDIR=str(tmp_path))
    env.pop("MASTER_PORT", None)
    out = subprocess.run([PY, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "23456"
    # a value no user's run could listen on stays: it fails here as it would for a maintainer
    assert out[1] == "''" and out[2] == "80"
    assert out[3] == "tcp://localhost:23456?world_size=2" and out[4] == "tcp://[::1]:23456"
    assert out[5] == f"file://{tmp_path}/reprobot-rdzv-23456-shared_init"
    # an init_method torch refuses, or a port no run listens on, stays as it is: a reduction once
    # emptied a file:// path and only this patch made the repro run (torch: "path missing")
    assert out[6] == "file://" and out[7] == "tcp://127.0.0.1:0"
    # torch reads "r" as a host (path missing), and makes no folder: both fail as they would by hand
    assert out[8] == "file://r" and out[9] == "file:///no/such/folder/rdzv"
    # a relative folder written into the URL is read as a host, and torch makes /rendezvous, which
    # only root may: it gets a file in a folder that does not exist, as a maintainer's run fails
    assert out[10] == f"file://{tmp_path}/reprobot-no-folder/rendezvous"
    assert out[11] == f"file://{tmp_path}/reprobot-rdzv-23456-shared_init"


@needs_gloo
def test_the_alone_check_runs_without_the_runs_own_rendezvous(tmp_path):
    # the check a maintainer's run stands for gets no port of its own: a script whose port another
    # process holds fails there as it would by hand, where every candidate run got a free port
    import socket
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    port = held.getsockname()[1]
    src = ('import torch.distributed as dist\n'
           f'dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1)\n'
           'raise KeyError("ran")\n')
    script = tmp_path / "r.py"
    script.write_text(src)
    runner = Runner(RunSpec(script=script, python=PY, timeout=60))
    try:
        if not 1024 <= port <= 65535:
            pytest.skip("the held port is not one a run could listen on")
        assert "KeyError: 'ran'" in runner.run(src).stderr
        alone = runner.run(src, alone=True)
    finally:
        held.close()
    assert "KeyError" not in alone.stderr, alone.stderr[-2000:]


@needs_gloo
def test_a_stored_repro_runs_again_through_its_launch_line(tmp_path):
    # issue #40: `versions`, `contrast` and `watch` ran `python repro.py` for a torchrun repro, so
    # every later step saw a different failure (RANK expected, but not set) or a pass
    from bot.rerun.repro_run import ReproRunner, StoredRepro
    from bot.rerun.verdict import Kind
    from bot.store import ReproDir
    _write(tmp_path / "train.py", ARGS_SCRIPT)
    proc = subprocess.run([PY, "-m", "bot", "reduce", "--no-reduce", "--no-env", "--out", "store", "--",
                           "torchrun", "--nproc_per_node", "2", "train.py", "--lr", "3"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    (folder,) = (tmp_path / "store").iterdir()
    (folder / "repro.py").write_text((folder / "original.py").read_text())     # --no-reduce: the repro is it
    repro = StoredRepro.load(ReproDir(folder))
    assert repro.recipe.launch[:3] == ("torchrun", "--nproc_per_node", "2")
    runner = ReproRunner(repro, PY)
    try:
        verdict = runner.verdict()
    finally:
        runner.close()
    assert verdict.kind is Kind.SAME, verdict
    # the same recipe gives the draft its steps and environment pinning its run: a module only
    # rank 1 imports is a root of the lock (a plain `python repro.py` has no rank 1)
    assert repro.recipe.command("repro.py").startswith("torchrun --nproc_per_node 2 ") \
        and repro.recipe.command("repro.py").endswith(" repro.py --lr 3")
    (folder / "repro.py").write_text(ARGS_SCRIPT.replace('    raise ValueError', '    import csv\n    raise ValueError'))
    from bot.env.lockfile import repro_modules
    assert "csv" in repro_modules(ReproDir(folder), PY, 120)
