"""Warm runs of a one-node torchrun or accelerate launch line: the ranks start from the warm image, as
spawn children do.

A launch line's run (``python -m torch.distributed.run --nproc_per_node 2 train.py ARGS``, see
reducer/run/launch.py) starts a launcher interpreter that imports torch, then one interpreter per rank
that imports torch and the script's whole stack again: on a 2-core machine most of a candidate's
time. For a line whose launcher does nothing but start N local ranks with torchrun's environment
and stop them all once one fails, a warm run does the same from a zygote (reducer/run/zygote.py):
``RANK_LAUNCHER`` (a script, run as the candidate's ``__main__`` in the warm interpreter) starts
the ranks with the ``spawn`` start method, which reducer/run/zygote_children.py serves from the warm
image, and runs the script in each as ``__main__`` with the variables torchrun gives a worker
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, ``TORCHELASTIC_*``...).
A rank's uncaught traceback is printed without the launcher's, runpy's and multiprocessing's
frames, so it reads as the cold rank's does and the Signature is the same; when a rank fails,
the others are sent SIGTERM (torchrun's agent does the same) and the launcher raises a
``ChildFailedError``, a wrapper (reducer/failure/ranks.py) that is never a target.

An ``accelerate launch`` line is run the same way: its launcher only parses its options and
config file into variables and a process count, then starts one process (``--cpu``, a single
process: its simple launcher) or torchrun's ranks (``--multi_gpu``). The warm launcher asks
accelerate's own parser and its ``prepare_*_env`` functions for both, at run time in the run's
environment (so its config file counts as it would), and starts that many ranks with those
variables; a line its config turns into another launcher (DeepSpeed, FSDP, a TPU, SageMaker, MPI)
stops, which the warm check below reads as "runs cold".

It is an optimisation with the real line as the reference: reducer/reduction/warm_start.py runs the original
both ways and keeps cold runs when they differ, and the result is verified cold, by the line.
Lines that need the real launcher stay cold: several nodes, restarts, ``--no-python``/``-m``,
``--run-path``, output redirection to files, an ``auto``/``gpu`` process count, options this module
does not know.
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from reducer.run.launch import ACCELERATE, ACCELERATE_FLAGS, TORCHRUN, LaunchLine

RANKS_ENV = "REPROBOT_RANKS"       # the plan (JSON) the warm launcher reads
LAUNCHER_NAME = "reprobot_rank_launcher.py"

# torchrun options a warm run honours, by what they mean for it (everything else: cold).
_NPROC = ("--nproc_per_node", "--nproc-per-node")
_ADDR = ("--master_addr", "--master-addr")
_NNODES = ("--nnodes",)
_NODE_RANK = ("--node_rank", "--node-rank")
_RESTARTS = ("--max_restarts", "--max-restarts")
_ROLE = ("--role",)
_RUN_ID = ("--rdzv_id", "--rdzv-id", "--run_id", "--run-id")
# Only where the rendezvous happens (the run has a port of its own) or how often the agent looks.
_HARMLESS = ("--master_port", "--master-port", "--rdzv_backend", "--rdzv-backend", "--rdzv_endpoint",
             "--rdzv-endpoint", "--rdzv_conf", "--rdzv-conf", "--monitor_interval", "--monitor-interval",
             "--start_method", "--start-method", "--local_addr", "--local-addr", "--log_dir", "--log-dir")
_HARMLESS_FLAGS = ("--standalone",)


@dataclass(frozen=True)
class RankPlan:
    """What the warm launcher needs of the line: as many ranks, and torchrun's worker variables.
    ``accelerate``: an ``accelerate launch`` line's options, which the launcher reads at run time
    with accelerate's own parser, config file included: its process count and its variables."""
    nproc: int
    master_addr: str = "127.0.0.1"
    role: str = "default"
    run_id: str = "none"
    accelerate: tuple[str, ...] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def _options(opts: list[str], flags=_HARMLESS_FLAGS) -> list[tuple[str, str | None]] | None:
    """(name, value) pairs of a launcher's options (``flags`` take no value); None when one
    cannot be read."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(opts):
        tok = opts[i]
        if not tok.startswith("-"):
            return None
        name, eq, value = tok.partition("=")
        if eq:
            out.append((name, value))
            i += 1
        elif name in flags:
            out.append((name, None))
            i += 1
        elif i + 1 < len(opts):
            out.append((name, opts[i + 1]))
            i += 2
        else:
            return None
    return out


# accelerate launch options a warm run leaves to accelerate's parser (what it reads of them is
# what its own launcher would), by name with dashes as underscores; any other option, and a
# launcher these choose (DeepSpeed, FSDP, Megatron, TPU, MPI, several machines), keeps the line cold.
_ACCELERATE_WARM = {"cpu", "multi_gpu", "num_processes", "mixed_precision", "main_process_port",
                    "main_process_ip", "num_machines", "machine_rank", "gpu_ids", "dynamo_backend",
                    "config_file", "quiet", "q", "debug", "same_network", "num_cpu_threads_per_process",
                    "rdzv_backend", "monitor_interval", "max_restarts"}


def _accelerate_plan(launch: LaunchLine) -> RankPlan | None:
    """An ``accelerate launch`` line whose options are all ones the warm launcher hands to
    accelerate's parser, read as launch.py split the line; its ranks are counted at run time
    (``--num_processes`` here only guesses the OpenMP default of the warm image)."""
    pairs = _options(launch.launcher_opts, ACCELERATE_FLAGS)
    if pairs is None:
        return None
    nproc = 1
    for name, value in pairs:
        key = name.lstrip("-").replace("-", "_")
        if key not in _ACCELERATE_WARM:
            return None
        if key == "num_machines" and value != "1":
            return None
        if key == "max_restarts" and value != "0":
            return None         # torchrun's agent would start the ranks again
        if key == "num_processes":
            if value is None or not value.isdigit() or int(value) < 1:
                return None
            nproc = int(value)
    return RankPlan(nproc, accelerate=tuple(launch.launcher_opts))


def warm_plan(launch: LaunchLine | None) -> RankPlan | None:
    """The plan of a line a warm run can stand in for, or None (the line runs cold)."""
    if launch is None or launch.module is not None:
        return None
    if launch.kind == ACCELERATE:
        return _accelerate_plan(launch)
    if launch.kind != TORCHRUN:
        return None
    pairs = _options(launch.launcher_opts)
    if pairs is None:
        return None
    nproc, addr, role, run_id = 1, "127.0.0.1", "default", "none"
    for name, value in pairs:
        if name in _NPROC:
            if value is None or not value.isdigit() or int(value) < 1:
                return None         # auto / gpu / cpu: counted by torchrun on the machine
            nproc = int(value)
        elif name in _ADDR:
            addr = value or addr
        elif name in _NNODES:
            if value not in ("1", "1:1"):
                return None
        elif name in _NODE_RANK:
            if value != "0":
                return None
        elif name in _RESTARTS:
            if value != "0":
                return None         # the agent would start the ranks again
        elif name in _ROLE:
            role = value or role
        elif name in _RUN_ID:
            run_id = value or run_id
        elif name in _HARMLESS or name in _HARMLESS_FLAGS:
            continue
        else:
            return None
    return RankPlan(nproc, addr, role, run_id)


def write_launcher(directory: Path | None = None) -> Path:
    directory = Path(directory or tempfile.mkdtemp(prefix="reprobot-ranks-"))
    path = directory / LAUNCHER_NAME
    path.write_text(RANK_LAUNCHER, encoding="utf-8")
    return path


# Runs in the USER's interpreter, as the candidate's __main__ in a warm child (stdlib only).
RANK_LAUNCHER = r'''"""reprobot: the ranks of a one-node torchrun line, started warm (reducer/run/rank_launch.py)."""
import json
import os
import runpy
import sys
import time

_STOP_WAIT = 30.0      # seconds the other ranks get after SIGTERM (torchrun's agent: 30)


class ChildFailedError(Exception):
    """As torchrun's: the launcher's report that a rank failed (never the failure itself)."""


def _rank(rank, plan, script, argv, extra=None, torchrun=True):
    os.environ.update(extra or {})
    if "MASTER_PORT" in (extra or {}) and os.environ.get("REPROBOT_MASTER_PORT"):
        os.environ["MASTER_PORT"] = os.environ["REPROBOT_MASTER_PORT"]     # the run's own port
    if torchrun:
        _torchrun_variables(rank, plan)
    sys.argv = [argv[0]] + list(argv[1:])
    sys.path[0] = os.path.dirname(script)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as exc:
        tb = exc.__traceback__
        # the traceback starts at the script, as a rank's does when torchrun runs it
        while tb is not None and tb.tb_frame.f_code.co_filename != script:
            tb = tb.tb_next
        tb = tb or exc.__traceback__
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        try:
            sys.stderr.flush()
        except Exception:
            pass
        sys.exit(1)


def _accelerate(plan, script, argv):
    """(ranks, the variables they get, whether torchrun's worker variables too): what accelerate's
    own launcher starts for the line's options, read by its own parser (its config file included)
    in this run's environment. A line the config turns into another launcher stops here: the
    original's warm check then fails and the reduction keeps its runs cold."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import launch as accelerate_launch
    args = launch_command_parser().parse_args(list(plan["accelerate"]) + [script] + list(argv[1:]))
    args, defaults, _ = _validate_launch_command(args)
    other = [getattr(args, name, False) and not args.cpu for name in ("use_deepspeed", "use_fsdp", "use_megatron_lm", "tpu")]
    sagemaker = "SAGEMAKER" in str(getattr(defaults, "compute_environment", "")).upper()
    if any(other) or sagemaker or getattr(args, "mpirun_hostfile", None) or args.no_python or args.module \
            or (args.num_machines or 1) > 1:
        sys.stderr.write("reprobot: this accelerate launch line runs only under accelerate itself\n")
        sys.exit(3)
    before = dict(os.environ)
    if args.multi_gpu and not args.cpu:
        env, nproc, torchrun = accelerate_launch.prepare_multi_gpu_env(args), int(args.num_processes), True
    else:
        env, nproc, torchrun = accelerate_launch.prepare_simple_launcher_cmd_env(args)[1], 1, False
    return nproc, {k: v for k, v in env.items() if before.get(k) != v}, torchrun


def _torchrun_variables(rank, plan):
    os.environ.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank), "GROUP_RANK": "0", "ROLE_RANK": str(rank),
        "ROLE_NAME": plan["role"], "LOCAL_WORLD_SIZE": str(plan["nproc"]), "WORLD_SIZE": str(plan["nproc"]),
        "GROUP_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": str(plan["nproc"]), "MASTER_ADDR": plan["master_addr"],
        "MASTER_PORT": os.environ.get("REPROBOT_MASTER_PORT") or os.environ.get("MASTER_PORT") or "29500",
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": plan["run_id"], "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    })
    if plan["nproc"] > 1 and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = "1"     # torchrun's default (the warm image was started with it)


def _main():
    import multiprocessing
    from multiprocessing.connection import wait
    plan = json.loads(os.environ["REPROBOT_RANKS"])
    argv = sys.argv[1:]
    script = os.path.abspath(argv[0])
    extra, torchrun = {}, True
    if plan.get("accelerate") is not None:
        nproc, extra, torchrun = _accelerate(plan, script, argv)
        plan = dict(plan, nproc=nproc)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_rank, args=(r, plan, script, argv, extra, torchrun), daemon=False)
             for r in range(plan["nproc"])]
    for p in procs:
        p.start()
    alive = {p.sentinel: (r, p) for r, p in enumerate(procs)}
    failed = []
    while alive and not failed:
        for sentinel in wait(list(alive)):
            r, p = alive.pop(sentinel)
            p.join()
            if p.exitcode != 0:
                failed.append((r, p.exitcode))
    if failed:
        for r, p in alive.values():
            p.terminate()
        end = time.monotonic() + _STOP_WAIT
        for r, p in alive.values():
            p.join(max(0.0, end - time.monotonic()))
            if p.exitcode is None:
                p.kill()
                p.join()
        raise ChildFailedError("; ".join("rank %d (local_rank %d) exitcode %s" % (r, r, code) for r, code in failed))


if __name__ == "__main__":
    _main()
'''
