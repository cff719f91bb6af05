"""`reprobot env`: capture (and pin) the environment a failure happened in, or check against it.

    reprobot env [--python PATH]                 show the environment (nothing written)
    reprobot env [--python PATH] REPRO_DIR       write env.json, requirements.in, requirements.lock
    reprobot env [--python PATH] --out DIR       write env.json into DIR
    reprobot env --check REPRO_DIR [--python P]  list what differs from REPRO_DIR/env.json
                                                 (exit 1 when something differs)
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from bot.commands._options import add_json, add_offline, add_python, repo_key, seconds
from bot.output import console
from bot.targets import REPO_KEYS
from reducer.errors import ExitCode, ReprobotError

MAX_PER_GROUP = 25  # the long tail of unrelated distributions is in --json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "env", help="capture and pin the failing environment (env.json, requirements.lock)",
        description="Probe the environment of the interpreter that runs the repro (--python, not reprobot's "
                    "own), write env.json and a lockfile into a repro folder, or compare the current "
                    "environment with a stored one (--check).")
    p.add_argument("repro_dir", nargs="?", type=Path, help="repro folder to write env.json and the lock into")
    add_python(p, "the user's interpreter")
    p.add_argument("--out", type=Path, default=None, help="write env.json into this folder instead")
    p.add_argument("--check", type=Path, default=None, metavar="REPRO_DIR",
                   help="compare with REPRO_DIR/env.json and list the differences")
    p.add_argument("--no-lock", action="store_true", help="write env.json only, no requirements.in/.lock")
    add_offline(p)
    p.add_argument("--system-info", type=repo_key, choices=REPO_KEYS, metavar="KEY",
                   help="print the System Info block that repository's bug form asks for "
                        "(a key, or owner/name)")
    add_json(p, "env.json (or the differences)")
    p.add_argument("--timeout", type=seconds("--timeout"), default=120.0,
                   help="seconds one probe attempt may take (default: 120)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.env.probe import capture_env

    if args.check is not None:
        if args.repro_dir is not None or args.out is not None:
            raise ReprobotError("--check takes the repro folder itself; drop REPRO_DIR/--out", ExitCode.USAGE)
        return _check(args)
    if args.repro_dir is not None and args.out is not None:
        raise ReprobotError("give either REPRO_DIR or --out DIR, not both", ExitCode.USAGE)

    if args.repro_dir is not None:
        from bot.store import ReproDir, write_json_atomic
        from bot.env.notebook_installs import notebook_requirements, screen_line
        repro = ReproDir.open(args.repro_dir)
        env = capture_env(args.python, timeout=args.timeout, notebook=notebook_requirements(repro.path))
        write_json_atomic(repro.env_json, env)
        console.print(f"wrote {escape(str(repro.env_json))}")
        if line := screen_line(env):        # a notebook's pins that this interpreter does not meet
            console.print(f"[yellow]{escape(line)}[/]")
        if not args.no_lock:
            if not repro.repro.is_file():
                raise ReprobotError(f"{repro.path}: no repro.py to compute the lock from (use --no-lock)",
                                    ExitCode.BAD_INPUT)
            from bot.env.lockfile import write_lock
            lock = write_lock(repro, args.python, None, offline=args.offline or None)
            how = "compiled with hashes" if lock.mode == "compiled" else f"snapshot ({lock.reason})"
            console.print(f"wrote {escape(str(repro.requirements_in))} ({len(lock.roots)} distributions) and "
                          f"{escape(str(repro.requirements_lock))} ({len(lock.closure)} pinned, {escape(how)})")
    elif args.out is not None:
        from bot.store import write_json_atomic
        env = capture_env(args.python, timeout=args.timeout)
        if args.out.exists() and not args.out.is_dir():
            raise ReprobotError(f"{args.out}: not a folder", ExitCode.BAD_INPUT)
        write_json_atomic(args.out / "env.json", env)
        console.print(f"wrote {escape(str(args.out / 'env.json'))}")
    else:
        env = capture_env(args.python, timeout=args.timeout)

    if args.json:
        print(json.dumps(env, indent=2))
    elif args.system_info:
        from bot.env.system_info import system_info
        print(system_info(env, args.system_info))
    elif args.repro_dir is None and args.out is None:
        _show(env)
    return 0


def _show(env: dict) -> None:
    from bot.env.probe import stack_names
    t = env.get("torch") or {}
    table = Table(title="environment", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    py = env.get("python") or {}
    table.add_row("python", f"{py.get('version')} ({py.get('implementation')})")
    table.add_row("platform", str((env.get("platform") or {}).get("platform")))
    mem = (env.get("memory") or {}).get("total_bytes")
    table.add_row("cpu / ram", f"{(env.get('cpu') or {}).get('model')} x{(env.get('cpu') or {}).get('count')}"
                  + (f" / {mem / 1024 ** 3:.1f} GiB" if mem else ""))
    if t.get("installed"):
        build = t.get("cuda_built") and f"CUDA {t['cuda_built']}" or t.get("hip_built") and f"ROCm {t['hip_built']}" or "CPU"
        table.add_row("torch", f"{t.get('version')} ({build}; CUDA available: {t.get('cuda_available')})")
    gpus = (env.get("gpu") or {}).get("gpus") or []
    if gpus:
        table.add_row("gpus", ", ".join(str(g.get("name")) for g in gpus)
                      + (f" (driver {env['gpu']['driver_version']})" if env["gpu"].get("driver_version") else ""))
    stack = stack_names()
    for name, pkg in (env.get("packages") or {}).items():
        if name == "torch" or not isinstance(pkg, dict):
            continue
        if not pkg.get("installed"):
            if name in stack:
                table.add_row(name, "absent")
            continue
        how = "" if pkg.get("kind") == "index" else f" [{pkg.get('kind')}]"
        bad = "" if pkg.get("import") in (None, "ok") else f" import FAILED: {pkg['import']}"
        table.add_row(name, f"{pkg.get('version')}{how}{bad}")
    bnb = env.get("bitsandbytes") or {}
    if bnb.get("installed"):
        table.add_row("bnb library", str(bnb.get("library") or bnb.get("import_error")))
    for k, v in (env.get("env_vars") or {}).items():
        table.add_row(f"${k}", str(v))
    for k, v in (env.get("probe_errors") or {}).items():
        table.add_row(f"probe: {k}", f"FAILED: {v}")
    # Every value is already scrubbed; escape so a value cannot inject rich markup.
    for col in table.columns:
        col._cells = [escape(str(c)) for c in col._cells]
    console.print(table)


def _check(args: argparse.Namespace) -> int:
    from bot.env.check import compare, summary
    from bot.env.probe import capture_env
    from bot.store import ReproDir

    path = args.check
    env_json = path / "env.json" if path.is_dir() else path
    if not env_json.is_file():
        raise ReprobotError(f"{path}: no env.json there (run `reprobot env {path}` on the failing machine)",
                            ExitCode.FILE_MISSING)
    stored = ReproDir(env_json.parent).read_json(env_json)
    if not isinstance(stored, dict) or "packages" not in stored:
        raise ReprobotError(f"{env_json}: not an env.json written by reprobot", ExitCode.BAD_INPUT)
    current = capture_env(args.python, timeout=args.timeout)
    diffs = compare(stored, current)
    if args.json:
        print(json.dumps({"differences": [d.to_dict() for d in diffs]}, indent=2, default=str))
    else:
        console.print(f"[bold]{escape(summary(diffs))}[/] (stored {escape(str(env_json))} → this interpreter)")
        group, shown = None, 0
        for d in diffs:
            if d.group != group:
                group, shown = d.group, 0
                console.print(f"[bold]{group}[/]")
            shown += 1
            if shown <= MAX_PER_GROUP:
                console.print("  " + escape(d.one_line()))
            elif shown == MAX_PER_GROUP + 1:
                rest = sum(1 for x in diffs if x.group == group) - MAX_PER_GROUP
                console.print(f"  ... and {rest} more (--json lists all)")
    return ExitCode.DIFFERENT if diffs else ExitCode.OK
