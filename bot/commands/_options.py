"""Options that several subcommands share, each defined here once.

One function per option: the flag, its dest, its default and its help text live in one place, so
`--api-url` (say) reads and behaves the same under every command that takes it. An option whose
meaning differs between commands (`--timeout`, `--jobs`, `--out`, `--repo`, ...) stays with its
command. `add_rerun_options` is the set that `versions` and `contrast` share: both re-run a stored repro.
"""
from __future__ import annotations

import argparse
import sys


def add_api_url(p: argparse.ArgumentParser) -> None:
    p.add_argument("--api-url", default=None,
                   help="GitHub API URL (default: $REPROBOT_GITHUB_API, else api.github.com)")


def add_db(p: argparse.ArgumentParser, when_empty: str = "") -> None:
    """``when_empty``: what the command falls back to when the index has nothing (appended to the help)."""
    note = f"; {when_empty} when it is empty" if when_empty else ""
    p.add_argument("--db", metavar="PATH", help=f"issue index file (default: the user's cache directory{note})")


def add_no_search(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-search", action="store_true", help="do not use GitHub search, even with a token")


def add_json(p: argparse.ArgumentParser, what: str, also: str = "") -> None:
    """``what``: what goes to stdout; ``also``: a side effect of the flag, appended to the help."""
    p.add_argument("--json", action="store_true", help=f"print {what} to stdout" + (f"; {also}" if also else ""))


def add_python(p: argparse.ArgumentParser, role: str) -> None:
    """``role``: what the interpreter is for in this command (the default is always reprobot's own)."""
    p.add_argument("--python", default=sys.executable, help=f"{role} (default: this one)")


def add_offline(p: argparse.ArgumentParser) -> None:
    p.add_argument("--offline", action="store_true",
                   help="pin the environment from what is installed, without asking the package index "
                        "(the lock has no hashes); for a machine without network")


def add_repro_dir(p: argparse.ArgumentParser, optional: bool = False) -> None:
    p.add_argument("repro_dir", **({"nargs": "?"} if optional else {}), help="repro folder (repros/<id>)")


def add_traceback(p: argparse.ArgumentParser) -> None:
    p.add_argument("--traceback", metavar="FILE",
                   help="a pasted traceback instead of a repro folder ('-' reads stdin)")


def add_rerun_options(p: argparse.ArgumentParser, written: str) -> None:
    add_repro_dir(p)
    add_python(p, "interpreter the repro failed in")
    p.add_argument("--timeout", type=float, default=None, help="seconds one run may take (default: 5x the original's)")
    add_json(p, written)


def notifier(args: argparse.Namespace):
    """Progress lines on the terminal, none with --json (stdout is the JSON)."""
    from bot.output import console
    return (lambda msg: None) if args.json else (lambda msg: console.print(f"[dim]{msg}[/]", highlight=False))
