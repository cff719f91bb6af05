"""`reprobot watch [ROOT]`: re-run every stored repro on the releases published since the last
check; record "still fails on X", "passes since X" or "fails differently since X", and post one
comment per new finding on each issue filed from the repro.

    reprobot watch repros --dry-run          run and record, print the comments instead of posting
    reprobot watch repros                    ...and post them (GITHUB_TOKEN with issues: write)
    reprobot watch repros --post-only        post what earlier runs recorded, run nothing
"""
from __future__ import annotations

import argparse
from pathlib import Path

from bot.commands._options import add_json, add_python, github_repo
from reducer.errors import ExitCode, ReprobotError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("watch", help="re-run stored repros on new releases; comment on the issues filed from them",
                       description="For every repro folder under ROOT: run it on the releases of its stack's "
                                   "packages published since the last check, record what changed, and post one "
                                   "comment per new finding on each issue filed from it (never closes, reopens "
                                   "or labels anything).")
    p.add_argument("root", nargs="?", default="repros", help="folder of repro folders (default: repros)")
    add_python(p, "interpreter the repros run in")
    p.add_argument("--state", metavar="DIR", help="keep the watch state here (DIR/<repro>.json) instead of "
                                                   "watch.json in each repro folder")
    p.add_argument("--packages", metavar="P,Q", help="packages to watch (default: the stack's, and those in the "
                                                     "failure's frames, as locked)")
    p.add_argument("--dry-run", action="store_true", help="run and record, but post nothing: print the comments")
    p.add_argument("--post-only", action="store_true", help="run nothing: post the findings earlier runs recorded")
    p.add_argument("--issues-in", metavar="OWNER/NAME", type=github_repo,
                   help="comment only on issues filed in this repository (a workflow's token reaches no other); "
                        "a target's KEY (as --repo takes) stands for its repository")
    p.add_argument("--pre", action="store_true", help="include pre-releases")
    p.add_argument("--index-url", help="package index (default: pip's configuration, or each lock's)")
    p.add_argument("--find-links", metavar="DIR", action="append", default=[],
                   help="also look for releases in DIR (a folder of wheels)")
    p.add_argument("--no-index", action="store_true", help="only --find-links, no package index")
    add_json(p, "the findings as JSON")
    p.set_defaults(func=run)


def _index(args: argparse.Namespace):
    from bot.commands.versions import index_flags
    from bot.rerun.releases import IndexOptions
    opts = index_flags(args)
    return IndexOptions(tuple(opts), pre=args.pre) if opts or args.pre else None


def run(args: argparse.Namespace) -> int:
    import json

    from bot.output import console
    from bot.rerun.watch import (WatchState, check_folder, comment_body, pending, post_findings, repro_folders,
                                 state_path, watch_marker)

    if args.dry_run and args.post_only:
        raise ReprobotError("--dry-run and --post-only contradict each other", ExitCode.USAGE)
    root = Path(args.root)
    folders = repro_folders(root)
    if not folders:
        raise ReprobotError(f"{root}: no repro folders in it", ExitCode.FILE_MISSING)
    say = lambda m: console.print(f"[dim]{m}[/]", highlight=False)  # noqa: E731  (silenced by --quiet/--json)
    state_dir = Path(args.state) if args.state else None
    packages = tuple(p.strip() for p in args.packages.split(",")) if args.packages else None
    client = login = None
    report: list[dict] = []
    failed = 0
    for folder in folders:
        state = WatchState.load(state_path(folder, state_dir))
        entry: dict = {"folder": str(folder.path), "new": [], "posted": [], "would_post": []}
        if not args.post_only:
            try:
                new = check_folder(folder, args.python, _index(args), state, packages, say,
                                   say_rate=lambda line, e=entry: _rate_changed(e, line))
            except ReprobotError as e:
                # One broken folder (no lock, no repro.py) must not stop the others being watched.
                entry["error"] = e.message
                failed += 1
                report.append(entry)
                say(f"{folder.path.name}: {e.message}")
                continue
            state.save()
            entry["new"] = [f.to_dict() for f in new]
            for f in new:
                say(f"{folder.path.name}: {f.sentence()}")
        todo = pending(folder, state, args.issues_in)
        if args.dry_run:
            sig = folder.signature().id
            for f, where in todo:
                entry["would_post"].append({"issue": where, "key": f.key, "marker": watch_marker(sig, f),
                                            "body": comment_body(folder, sig, f)})
                say(f"would comment on {where}: {f.sentence()}")
        elif todo:
            if client is None:
                from bot.issue.filing import filer_login
                from bot.issue.github import github_client
                client = github_client(write=True)
                login = filer_login(client)
            entry["posted"] = [{"issue": where, "key": f.key, "status": status, "url": f.posted[where]}
                               for f, where, status in post_findings(folder, state, client, login, say, args.issues_in)]
        report.append(entry)
    line = summary(report)
    console.print(line, highlight=False)
    if args.json:
        print(json.dumps({"folders": report, "summary": line}, indent=2))
    return ExitCode.OK if not failed else ExitCode.BAD_INPUT


def _rate_changed(entry: dict, line: str) -> None:
    """A run on the locked releases passed where the failure was taken to fail every time: said
    on screen (and in --json), as `versions` says it."""
    from rich.markup import escape

    from bot.output import console
    entry["rate"] = line
    console.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)


def summary(report: list[dict]) -> str:
    """The run in one line, always printed: a second run with nothing new still says so
    ("3 repros, nothing changed") instead of printing nothing."""
    count = lambda key: sum(len(e[key]) for e in report)  # noqa: E731
    n = len(report)
    parts = [f"{k} {what}" for k, what in ((count("new"), "new finding(s)"),
                                           (count("posted"), "comment(s) posted"),
                                           (count("would_post"), "comment(s) to post (dry run)"),
                                           (sum(1 for e in report if "error" in e), "folder(s) not checked"))
             if k]
    return f"{n} repro{'s' if n != 1 else ''}, " + (", ".join(parts) if parts else "nothing changed")
