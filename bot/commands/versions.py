"""`reprobot versions repros/<id>`: is it fixed upstream? The repro against other releases, by running.

    reprobot versions repros/<id>                       locked / each latest alone / all latest
    reprobot versions repros/<id> --bisect peft         first release where the outcome changes
    reprobot versions repros/<id> --package peft --range 0.17.0..0.21.2   every release in a range
    reprobot versions repros/<id> --git transformers@main                  a VCS install (needs network)
"""
from __future__ import annotations

import argparse

from bot.commands._options import add_rerun_options, notifier
from reducer.errors import ExitCode, ReprobotError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("versions", help="re-run the repro against other releases (is it fixed upstream?)",
                       description="Run the repro cold against other releases of the stack, each in a "
                                   "throwaway environment (cached), and say where it passes, fails the same "
                                   "way, or fails differently.")
    add_rerun_options(p, "versions.json")
    p.add_argument("--bisect", metavar="PACKAGE", help="binary-search PACKAGE's releases for the first change")
    p.add_argument("--package", metavar="PACKAGE", help="run every release of PACKAGE in --range")
    p.add_argument("--range", metavar="A..B", help="releases from A to B, both included (either may be empty)")
    from bot.targets import versions_packages
    p.add_argument("--packages", metavar="P,Q", help="packages the default rows swap (default: "
                   f"{', '.join(versions_packages())}, as locked)")
    p.add_argument("--pre", action="store_true", help="include pre-releases")
    p.add_argument("--git", metavar="PACKAGE@REF", action="append", default=[],
                   help="add a row with PACKAGE installed from its GitHub repository at REF")
    p.add_argument("--index-url", help="package index (default: pip's configuration, or the lock's)")
    p.add_argument("--find-links", metavar="DIR", action="append", default=[],
                   help="also look for releases in DIR (a folder of wheels)")
    p.add_argument("--no-index", action="store_true", help="only --find-links, no package index")
    p.set_defaults(func=run)


def _range(text: str | None) -> tuple[str | None, str | None]:
    if not text:
        return None, None
    if ".." not in text:
        raise ReprobotError(f"--range {text}: expected A..B (either side may be empty)", ExitCode.USAGE)
    low, high = text.split("..", 1)
    return low or None, high or None


def index_flags(args: argparse.Namespace) -> list[str]:
    """pip's index options as the command line gave them (empty: none given)."""
    opts: list[str] = []
    if args.index_url:
        opts += ["--index-url", args.index_url]
    for d in args.find_links:
        opts += ["--find-links", d]
    if args.no_index:
        opts.append("--no-index")
    return opts


def index_options(args: argparse.Namespace, lock) -> "IndexOptions":
    from bot.rerun.releases import IndexOptions
    return IndexOptions(tuple(index_flags(args) or lock.index_options), pre=args.pre)


def git_url(package: str, ref: str) -> str:
    from bot.rerun.lock import github_repos
    repos = github_repos()
    repo = repos.get(package)
    if repo is None:
        raise ReprobotError(f"--git {package}@{ref}: no known repository for {package} "
                            f"(known: {', '.join(sorted(repos))})", ExitCode.USAGE)
    return f"git+https://github.com/{repo}@{ref}"


def run(args: argparse.Namespace) -> int:
    import json

    from rich.markup import escape

    from bot.output import console
    from bot.rerun.lock import read_lock
    from bot.rerun.report import print_rows
    from bot.rerun.steps import run_versions
    from bot.store import ReproDir

    folder = ReproDir.open(args.repro_dir)
    if args.bisect and args.package and args.bisect != args.package:
        raise ReprobotError("--bisect and --package name different packages", ExitCode.USAGE)
    low, high = _range(args.range)
    git = []
    for spec in args.git:
        package, _, ref = spec.partition("@")
        git.append((package, git_url(package, ref or "main")))
    packages = tuple(p.strip() for p in args.packages.split(",")) if args.packages else None
    notify = notifier(args)
    rows, bisection, data = run_versions(
        folder, args.python, index=index_options(args, read_lock(folder.requirements_lock)), packages=packages,
        bisect=args.bisect, sweep=None if args.bisect else args.package, low=low, high=high, git=tuple(git),
        timeout=args.timeout, notify=notify,
        say_rate=lambda line: console.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True))
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    if rows:
        print_rows(rows)
    if bisection:
        console.print(f"[bold]{bisection.sentence()}[/]", highlight=False)
        for v, verdict in bisection.tried:
            console.print(f"  {args.bisect} {v}: {verdict.label()}", highlight=False)
    console.print(f"{data['runs']} runs; written to {folder.path / 'versions.json'}", highlight=False, soft_wrap=True)
    return 0
