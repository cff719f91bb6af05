"""`reprobot action gate|reproduce|publish`: the GitHub Action's steps (see docs/ACTION.md)."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from bot.action.event import DEFAULT_LABEL, load_event
from bot.action.reproduce import DEFAULT_MAX_BODY, DEFAULT_MAX_TIME, DEFAULT_TIMEOUT
from bot.action.sandbox import Limits
from bot.commands._options import add_api_url, add_offline, add_python
from bot.output import console
from reducer.errors import ExitCode, ReprobotError



def _positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value
    return parse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("action", help="the GitHub Action's steps (gate, reproduce, publish)",
                       description="Steps of the discussion-labelled workflow. Each reads the event from "
                                   "--event or $GITHUB_EVENT_PATH; none takes event text on the command line.")
    steps = p.add_subparsers(dest="step", metavar="STEP", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--event", type=Path, default=None, help="event payload (default: $GITHUB_EVENT_PATH)")
        q.add_argument("--label", default=None,
                       help=f"label that triggers a run (default: $REPROBOT_LABEL, else {DEFAULT_LABEL})")

    g = steps.add_parser("gate", help="may this event run? (writes allowed=true|false to $GITHUB_OUTPUT, and "
                                      "edited=true when the post changed after the label: nothing runs, publish "
                                      "says so)")
    common(g)
    add_api_url(g)
    g.set_defaults(func=run_gate)

    r = steps.add_parser("reproduce", help="extract the script from the discussion and reduce it (no token)")
    common(r)
    r.add_argument("--out", type=Path, required=True, help="artifact folder to write (result.json, repro/)")
    r.add_argument("--max-body", type=_positive(int), default=DEFAULT_MAX_BODY,
                   help=f"largest discussion body accepted, bytes (default: {DEFAULT_MAX_BODY})")
    r.add_argument("--max-time", type=_positive(float), default=DEFAULT_MAX_TIME,
                   help=f"bound on the whole reduction, seconds (default: {DEFAULT_MAX_TIME:g})")
    r.add_argument("--timeout", type=_positive(float), default=DEFAULT_TIMEOUT,
                   help=f"bound on one run of the script, seconds (default: {DEFAULT_TIMEOUT:g})")
    r.add_argument("--runs", type=_positive(int), default=2, help="runs that must fail before reducing (default: 2)")
    add_python(r, "interpreter that runs the script")
    r.add_argument("--install-deps", action="store_true",
                   help="pip-install the dependency hints found in the post (plain requirements only)")
    r.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                   help="pass this environment variable to the script too (never a secret)")
    add_offline(r)
    r.add_argument("--keep-scratch", action="store_true", help="leave the scratch folder behind (debugging)")
    r.add_argument("--isolation", choices=("namespaces", "none"), default="namespaces",
                   help="run the posted code in Linux namespaces (no network, own /proc, the runner's "
                        "credentials hidden) and refuse when that is unavailable (default); 'none' only on a "
                        "runner that is itself a sandbox")
    r.add_argument("--read-only", action="append", default=[], metavar="PATH",
                   help="share this host folder read-only with the sandbox (a model cache); the runner's own "
                        "folders stay hidden even inside it")
    r.add_argument("--max-procs", type=_positive(int), default=Limits.procs,
                   help=f"processes and threads the posted code may have at once: each run is stopped there, "
                        f"and the whole sandbox holds at most this + 256 where a pids cgroup can be made "
                        f"(default: {Limits.procs}); the reply names a limit that was hit")
    r.add_argument("--max-disk-mb", type=_positive(int), default=Limits.disk >> 20,
                   help=f"scratch space for the runs, MiB: a tmpfs holding their folders, HOME and /tmp; "
                        f"each run is stopped at half of it (default: {Limits.disk >> 20})")
    r.add_argument("--max-file-mb", type=_positive(int), default=Limits.file_size >> 20,
                   help=f"largest file a run may write, MiB (default: {Limits.file_size >> 20})")
    r.set_defaults(func=run_reproduce)

    u = steps.add_parser("publish", help="post (or edit) the reply from an artifact folder")
    common(u)
    u.add_argument("--artifact", type=Path, required=True, help="the folder `reproduce` wrote")
    add_api_url(u)
    u.add_argument("--dry-run", action="store_true", help="print the reply instead of posting it")
    u.set_defaults(func=run_publish)


def run_gate(args: argparse.Namespace) -> int:
    from bot.action.workflow import gate, set_output
    from bot.issue.github import github_client

    event = load_event(args.event)
    decision = gate(event, github_client(api_url=args.api_url, require_token=True), args.label)
    set_output("allowed", "true" if decision.allowed else "false")
    if decision.edited:
        set_output("edited", "true")
    console.print(("allowed: " if decision.allowed else "not allowed: ") + escape(decision.reason))
    return 0


def run_reproduce(args: argparse.Namespace) -> int:
    from bot.action.workflow import ReproduceOptions, reproduce

    event = load_event(args.event)
    if args.out.exists() and not args.out.is_dir():
        raise ReprobotError(f"{args.out}: exists and is not a folder", ExitCode.USAGE)
    opts = ReproduceOptions(out=args.out, label=args.label, max_body=args.max_body, max_time=args.max_time,
                            timeout=args.timeout, runs=args.runs, install_deps=args.install_deps,
                            python=args.python, pass_env=tuple(args.pass_env), keep_scratch=args.keep_scratch,
                            offline=args.offline, isolation=args.isolation,
                            read_only=tuple(str(Path(p).resolve()) for p in args.read_only),
                            limits=Limits(procs=args.max_procs, disk=args.max_disk_mb << 20,
                                          file_size=args.max_file_mb << 20))
    result = reproduce(event, opts)
    console.print(f"status: [bold]{result.status}[/]" + (f" ({escape(result.detail)})" if result.detail else ""))
    console.print(f"artifact: {escape(str(args.out))}")
    return 0


def run_publish(args: argparse.Namespace) -> int:
    from bot.action.workflow import publish
    from bot.issue.github import github_client

    event = load_event(args.event)
    if not args.artifact.is_dir():
        raise ReprobotError(f"{args.artifact}: artifact folder not found", ExitCode.FILE_MISSING)
    client = None if args.dry_run else github_client(api_url=args.api_url, write=True)
    outcome = publish(event, args.artifact, client, label=args.label, dry_run=args.dry_run)
    if args.dry_run and outcome.body is not None:
        console.print(outcome.body, markup=False)
    console.print(escape(outcome.reason))
    return 0
