"""`reprobot reduce SCRIPT [-- ARGS]`: find how the script fails, then shrink it."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bot.commands._options import add_json, add_python, seconds, whole
from bot.output import console, print_failure
from bot.store import DEFAULT_ROOT, record_failure
from reducer.errors import ExitCode, ReprobotError
from reducer.failure.flaky import DEFAULT_CAP
from reducer.failure.original import MAX_NESTING, FailureSpec, check_nesting, find_failure, load_script
from reducer.failure.signature import DEFAULT_FRAMES, MatchOptions
from reducer.failure.tracebacks import HANG_ENV
from reducer.run.limits import (DEFAULT_EXTRA_PROCESSES, DEFAULT_MAX_DISK, DEFAULT_MAX_FILE_SIZE,
                            DEFAULT_MAX_SCRIPT_BYTES, DEFAULT_MAX_STATEMENTS, RunLimits, check_script_bytes,
                            check_statements)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reduce", help="reduce a failing script to a minimal repro",
        description="Run SCRIPT, find how it fails, and shrink it to the smallest script that "
                    "fails with the same signature. Arguments after `--` go to the script. Without "
                    "SCRIPT, what follows `--` is a launch line (`-- torchrun --nproc_per_node 2 train.py "
                    "ARGS`, `-- accelerate launch ... train.py ARGS`, `-- python -m pkg.mod ARGS`): the "
                    "script it names is reduced, and every run uses the same line. SCRIPT may be a Jupyter "
                    "notebook (`reprobot reduce lora_explore.ipynb`): its code cells run in order as one "
                    "script; `!pip install` lines are recorded, not run; timing and display magics are "
                    "dropped (`%time STMT` and a `%%time` cell keep their code); any other magic or shell "
                    "line is refused with the cell and line; the failing cell is reported and the repro "
                    "is a plain repro.py. SCRIPT may be a pytest test: `reprobot reduce tests/test_x.py::test_name`, "
                    "a parametrized id (`tests/test_x.py::test_name[param-id]`), `tests/test_x.py -k EXPR`, a "
                    "test file, or the launch line `-- pytest tests/test_x.py::test_name` (`-- python -m pytest "
                    "...`, the same): pytest runs it once, the first failing test (--pick N: the Nth) is written "
                    "as a plain script with its fixtures as plain code (tmp_path, tmp_path_factory, monkeypatch, "
                    "capsys, and the fixtures of your conftest.py files and test module; any other is refused "
                    "with one line naming it) and the chosen parameter set's values, checked to fail as the test "
                    "does, and reduced.")
    p.add_argument("script", type=Path, nargs="?", default=None,
                   help="the failing Python script, Jupyter notebook or pytest test (tests/test_x.py::test_name) "
                        "(or none, and a launch line after `--`)")
    p.add_argument("-k", dest="keyword", default=None, metavar="EXPR",
                   help="with a test file: the tests pytest's -k EXPR selects (the first failing one is reduced)")
    add_python(p, "interpreter that runs the script")
    p.add_argument("--out", type=Path, default=DEFAULT_ROOT, help="folder of the repros store (default: ./repros)")
    p.add_argument("--frames", type=whole("--frames", 0), default=DEFAULT_FRAMES,
                   help=f"innermost library frames that must match (default: {DEFAULT_FRAMES})")
    p.add_argument("--ignore-message", action="store_true", help="match on type and frames only")
    p.add_argument("--normalize-devices", action="store_true",
                   help="treat cuda:0 and cuda:1 (GPU 0, GPU 1) as the same in messages")
    p.add_argument("--pick", type=whole("--pick", 1), default=1,
                   help="which of several distinct failures to keep (1-based); for tests, which failing test")
    p.add_argument("--runs", type=whole("--runs", 1), default=2,
                   help="runs that must show the failure before reducing (default: 2); when one of them passes "
                        "or fails differently, the failure is flaky and its rate is measured (--flaky-runs)")
    p.add_argument("--flaky-runs", type=whole("--flaky-runs", 1), default=DEFAULT_CAP, metavar="N",
                   help=f"runs of a flaky original at most, to measure how often it fails (default: {DEFAULT_CAP})")
    p.add_argument("--hang-after", type=seconds("--hang-after"), default=None, metavar="S",
                   help="a run that prints nothing for S seconds hangs: every process dumps its threads' stacks "
                        "and the waiting thread's innermost frames are the failure to reduce")
    p.add_argument("--timeout", type=seconds("--timeout"), default=900.0,
                   help="seconds one run of the original may take (default: 900)")
    p.add_argument("--jobs", type=whole("--jobs", 1), default=1, help="candidates evaluated in parallel (default: 1)")
    p.add_argument("--cold", action="store_true",
                   help="start every run from a fresh interpreter (default: fork runs from a warm "
                        "interpreter that imported the script's stack once; the result is verified cold)")
    p.add_argument("--gpus", default=None,
                   help="GPUs for candidate runs, e.g. 0,1 (default: all visible; none: no pinning); each job "
                        "is pinned to a set of as many as the original used")
    p.add_argument("--gpus-per-job", type=whole("--gpus-per-job", 1), default=None, metavar="N",
                   help="GPUs each job gets (default: as many as the original used, measured in its first run)")
    p.add_argument("--jobs-per-gpu", type=whole("--jobs-per-gpu", 1), default=1,
                   help="candidates that may share one GPU at a time (default: 1)")
    p.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="run the candidates on a Ray cluster: ray://HOST:PORT, or auto (RAY_ADDRESS); needs the "
                        "extra `pip install 'reprobot[ray]'`. Each node's Python and stack versions must match "
                        "this machine's; the original and the final verdict still run here")
    p.add_argument("--cluster-slots", type=whole("--cluster-slots", 1), default=None, metavar="N",
                   help="slots to place on the cluster (default: as many as its nodes hold, one CPU each, "
                        "and as many GPUs as a job needs)")
    p.add_argument("--max-time", type=seconds("--max-time"), default=None,
                   help="bound on the search, in seconds (default: none); the best result so far is then "
                        "verified cold like a finished one, within four cold runs of the original (at least "
                        "60 s) past it, and its environment pinned within 60 s more; a result not verified "
                        "in time is marked so")
    p.add_argument("--max-script-size", type=whole("--max-script-size", 0), default=DEFAULT_MAX_SCRIPT_BYTES, metavar="BYTES",
                   help=f"refuse a larger script (exit {ExitCode.TOO_LARGE}; default: {DEFAULT_MAX_SCRIPT_BYTES:,}; 0: no cap)")
    p.add_argument("--max-statements", type=whole("--max-statements", 0), default=DEFAULT_MAX_STATEMENTS, metavar="N",
                   help=f"refuse a script with more statements (default: {DEFAULT_MAX_STATEMENTS:,}; 0: no cap); "
                        f"one nested more than {MAX_NESTING} levels deep (a 600-term sum) is always refused, exit "
                        f"{ExitCode.TOO_LARGE}")
    p.add_argument("--max-processes", type=whole("--max-processes", 0), default=DEFAULT_EXTRA_PROCESSES, metavar="N",
                   help="processes and threads one run may have at once: a run that reaches N is stopped and "
                        "counts as not the same failure (its own pids cgroup where one can be made, else its "
                        "process group, counted while it runs; RLIMIT_NPROC at your current count + N too; "
                        f"default: {DEFAULT_EXTRA_PROCESSES}; 0: no limit)")
    p.add_argument("--max-disk", type=whole("--max-disk", 0), default=DEFAULT_MAX_DISK, metavar="BYTES",
                   help="bytes one run may write in its own folder (its copy of the script's folder, its TMPDIR "
                        "and its HOME), measured every second and at its end; past it the run is stopped and "
                        f"counts as not the same failure (default: {DEFAULT_MAX_DISK} = 4 GiB; 0: no limit). "
                        "Elsewhere only --max-file-size bounds a write")
    p.add_argument("--max-file-size", type=whole("--max-file-size", 0), default=DEFAULT_MAX_FILE_SIZE, metavar="BYTES",
                   help=f"largest file a run may write anywhere (RLIMIT_FSIZE; default: {DEFAULT_MAX_FILE_SIZE} "
                        f"= 1 GiB; 0: no limit). When the original run hits any of these limits, reduce stops with one "
                        f"line naming it (exit {ExitCode.RUN_LIMIT}). Every run also gets its own HOME and XDG "
                        f"folders in its scratch folder (your caches, such as HF_HOME, stay yours)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted reduction of this script (its stored failure is trusted)")
    p.add_argument("--no-trace", action="store_true", help="skip the trace-guided first cut")
    p.add_argument("--no-reduce", action="store_true", help="stop after finding and storing the failure")
    p.add_argument("--no-env", action="store_true",
                   help="skip env.json and the lockfile (`reprobot env` writes them later)")
    add_json(p, "one JSON object at the end (folder, status, sizes, runs, signature)", also="implies --quiet")
    p.add_argument("--versions", action="store_true",
                   help="afterwards, re-run the repro against the latest releases (`reprobot versions`)")
    p.add_argument("--contrast", action="store_true",
                   help="afterwards, try one change at a time to see what makes it pass (`reprobot contrast`)")
    p.add_argument("--from-outputs", action="store_true",
                   help="a notebook: report the failure its saved error output shows (the cell, the exception) "
                        "before any run, then confirm it by running; says plainly when the run does not")
    p.add_argument("--as-notebook", action="store_true",
                   help="a notebook: also write repro.ipynb, one code cell holding repro.py")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # --quiet (and --json, which implies it) is the CLI's: bot/cli.py silences bot.output.console.
    args.repro = None
    try:
        return _run(args)
    finally:
        if args.json and args.repro is not None:  # also when stopped at --max-time or interrupted
            print(json.dumps(summary(args.repro), indent=2))


def summary(repro) -> dict:
    """What --json prints: enough for a script to pick up the result."""
    from bot.scrub import scrub_json
    reduction = repro.read_json(repro.reduction_json) if repro.reduction_json.is_file() else {}
    sig = repro.read_json(repro.signature_json)
    data = {"repro_dir": str(repro.path), "repro": str(repro.repro) if repro.repro.is_file() else None,
            "status": reduction.get("status", "not reduced"),
            "statements_before": reduction.get("statements_before"),
            "statements_after": reduction.get("statements_after"), "runs": reduction.get("runs"),
            "signature": sig.get("signature"), "next": f"reprobot file --dry-run {repro.path}"}
    return scrub_json(data)


def _run(args: argparse.Namespace):
    deadline = None if args.max_time is None else time.monotonic() + args.max_time
    if args.cluster is not None:
        _check_cluster(args)
    script_args = list(args.passthrough)
    launch = None
    from bot.pytest_input import requested_node
    # A pytest test (node id, -k, a test file, `-- pytest ...`): written as a plain script that
    # fails the same way (bot/pytest_input.py), then reduced as any script, under the test
    # module's name in a scratch copy of its folder.
    request = requested_node(args.script, getattr(args, "keyword", None), script_args)
    test = args.test = None
    if request is not None:
        from bot.pytest_input import load_test
        test = args.test = load_test(request, args.python, args.timeout, args.pick)
        args.script, script_args = test.path, []
    elif args.script is None:
        from reducer.run.launch import parse_launch
        launch = parse_launch(script_args, Path.cwd(), args.python)
        args.script, script_args = launch.script, list(launch.args)
        if not launch.needs_launcher:
            launch = None        # `-- python train.py ARGS`: the same as `train.py -- ARGS`
    from bot.notebook import load_notebook
    # A notebook's code cells, exported to one script (bot/notebook.py); anything else is a script.
    # A notebook's saved outputs (plots) do not count against --max-script-size: its code does.
    notebook = args.notebook = load_notebook(args.script, args.max_script_size) if test is None else None
    if args.script.is_file():
        check_script_bytes(len(notebook.script.encode()) if notebook is not None else
                           len(test.script.script.encode()) if test is not None else args.script.stat().st_size,
                           args.max_script_size)
    if notebook is None and (args.from_outputs or args.as_notebook) and args.script.is_file():
        raise ReprobotError(f"{args.script}: --from-outputs and --as-notebook are for a notebook (.ipynb)",
                            ExitCode.USAGE)
    source = notebook.script if notebook is not None else test.script.script if test is not None \
        else load_script(args.script)
    check_statements(source, args.max_statements)
    check_nesting(source, args.script)   # a notebook's exported script too (load_script checks a file's)
    spec = FailureSpec(
        script=args.script, source=source, python=args.python, args=tuple(script_args),
        options=MatchOptions(args.frames, args.ignore_message, args.normalize_devices),
        pick=args.pick if test is None else 1, runs=args.runs, timeout=args.timeout, deadline=deadline,
        limits=RunLimits(args.max_processes, args.max_file_size, args.max_disk), gpus=_gpus(args),
        gpus_per_job=args.gpus_per_job, launch=launch, flaky_runs=args.flaky_runs,
        env=({HANG_ENV: f"{args.hang_after:g}"} if args.hang_after else {}))
    from bot.store import find_stored
    stored = find_stored(args.out, spec) if args.resume else None
    if stored is not None:
        failure, repro = stored
        console.print(f"resuming {repro.path}: failure [cyan]{failure.signature.id}[/] as stored "
                      f"(not confirmed again)")
    else:
        if notebook is not None:
            from bot.notebook import announce
            announce(notebook, args.from_outputs)
        try:
            failure = find_failure(spec, notify=lambda msg: console.print(f"[dim]{msg}[/]", highlight=False))
        except ReprobotError as e:
            if test is not None:
                from bot.pytest_input import not_reproduced as test_not_reproduced
                raise test_not_reproduced(test, e) from None
            if notebook is None or not args.from_outputs:
                raise
            from bot.notebook import not_reproduced
            raise not_reproduced(notebook, e) from None
        if test is not None:
            from bot.pytest_input import confirm
            confirm(test, failure)
        repro = record_failure(failure, root=args.out)
        print_failure(failure, repro)
        if notebook is not None:
            from bot.notebook import report
            report(notebook, failure, repro, args.from_outputs)
        if test is not None:
            from bot.pytest_input import report as report_test
            report_test(test, failure, repro)
    args.repro = repro
    if args.no_reduce:
        return 0
    from bot.reduction import Options, reduce_failure  # the engine is only loaded when it is used
    reduce_failure(failure, repro, Options(
        jobs=args.jobs, gpus=args.gpus, jobs_per_gpu=args.jobs_per_gpu, max_time=args.max_time,
        deadline=deadline, resume=args.resume, trace=not args.no_trace, pin_env=not args.no_env,
        warm=not args.cold, cluster=args.cluster, cluster_slots=args.cluster_slots))
    if args.as_notebook:
        from bot.notebook import write_repro_notebook
        written = write_repro_notebook(repro)
        if written is not None:
            console.print(f"repro.py as a one-cell notebook: {written}")
    if args.versions or args.contrast:
        _rerun(repro, args)
    console.print(f"next: [bold]reprobot file --dry-run {repro.path}[/] previews the issue it would file")
    return 0


def _check_cluster(args: argparse.Namespace) -> None:
    """A bad --cluster value, or Ray missing, stops the command before anything runs."""
    address = args.cluster.strip()
    if not address or (address != "auto" and ":" not in address):
        raise ReprobotError(f"--cluster {args.cluster!r}: expected ray://HOST:PORT, HOST:PORT or auto", ExitCode.USAGE)
    if args.cluster_slots is not None and args.cluster_slots < 1:
        raise ReprobotError("--cluster-slots: expected 1 or more", ExitCode.USAGE)
    from reducer.cluster.session import check_available
    check_available()


def _gpus(args: argparse.Namespace) -> list[str]:
    from reducer.run.gpu import parse_gpus
    if args.gpus_per_job is not None and args.gpus_per_job < 1:
        raise ReprobotError("--gpus-per-job: expected 1 or more", ExitCode.USAGE)
    return parse_gpus(args.gpus)


def _rerun(repro, args: argparse.Namespace) -> None:
    from bot.output import console
    from bot.rerun.report import print_contrast, print_rows
    from bot.rerun.steps import run_contrast, run_versions
    from reducer.errors import ReprobotError

    notify = lambda msg: console.print(f"[dim]{msg}[/]", highlight=False)  # noqa: E731
    if args.versions:
        try:
            rows, _, data = run_versions(repro, args.python, notify=notify)
            print_rows(rows)
        except ReprobotError as e:  # no lock (--no-env), say so and go on to contrast
            console.print(f"[yellow]versions skipped:[/] {e.message}")
    if args.contrast:
        results, _ = run_contrast(repro, args.python, jobs=args.jobs, notify=notify)
        print_contrast(results)
