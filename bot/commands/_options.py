"""Options that several subcommands share, each defined here once.

One function per option: the flag, its dest, its default and its help text live in one place, so
`--api-url` (say) reads and behaves the same under every command that takes it. An option whose
meaning differs between commands (`--timeout`, `--jobs`, `--out`, ...) stays with its command.
`add_rerun_options` is the set that `versions` and `contrast` share: both re-run a stored repro.
`--repo` is a target's KEY under every command (`add_repo`); `--quiet` is added to every command
by bot/cli.py.
"""
from __future__ import annotations

import argparse
import math
import sys


def repo_key(value: str) -> str:
    """``--repo``'s type: a target's key ("peft"), or its owner/name ("huggingface/peft") mapped
    to the key; anything else is reprobot's one-line usage error (bot/cli.py parses inside its
    error handling)."""
    from bot.targets import get_target
    return get_target(value).key


def github_repo(value: str) -> str:
    """A GitHub repository that need not be a target (the Action's own, a fork): owner/name as
    given, or a target's key mapped to its owner/name, as ``--repo`` reads keys."""
    from bot.targets import REPO_KEYS, get_target
    from reducer.errors import ExitCode, ReprobotError
    if value in REPO_KEYS:
        return get_target(value).repo
    owner, _, name = value.partition("/")
    if not owner or not name or "/" in name or any(c.isspace() for c in value):
        raise ReprobotError(f"{value!r} is neither OWNER/NAME nor a target key ({', '.join(REPO_KEYS)})",
                            ExitCode.USAGE)
    return value


def whole(flag: str, minimum: int):
    """A count option's type: a whole number of at least ``minimum``; anything else (``--jobs 0``,
    ``--runs -1``, ``--top many``) is reprobot's one-line usage error before anything runs."""
    def parse(text: str) -> int:
        from reducer.errors import ExitCode, ReprobotError
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise ReprobotError(f"{flag} takes a whole number of at least {minimum}, not {text!r}", ExitCode.USAGE)
        return value
    return parse


def seconds(flag: str):
    """A duration option's type: a finite number of seconds above 0 (``--max-time -5`` and
    ``--timeout nan`` are usage errors, not a run that stops at once or never)."""
    def parse(text: str) -> float:
        from reducer.errors import ExitCode, ReprobotError
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise ReprobotError(f"{flag} takes a number of seconds above 0, not {text!r}", ExitCode.USAGE)
        return value
    return parse


def add_repo(p: argparse.ArgumentParser, help: str, *, many: bool = False, required: bool = False) -> None:
    """``--repo KEY`` (owner/name accepted); ``many``: repeatable, a list."""
    from bot.targets import REPO_KEYS
    p.add_argument("--repo", type=repo_key, choices=REPO_KEYS, metavar="KEY", required=required,
                   **({"action": "append"} if many else {}),
                   help=f"{help}; KEY is one of {', '.join(REPO_KEYS)} (owner/name also accepted)")


class DeprecatedAlias(argparse.Action):
    """An old spelling of a flag: sets the new flag's dest and says the new name, in one line."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        self.new = new
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                         **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from bot.output import err_console
        err_console.print(f"reprobot: {option_string} is now {self.new} (the old spelling will go away)",
                          markup=False)
        setattr(namespace, self.dest, True)


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
    p.add_argument("--timeout", type=seconds("--timeout"), default=None,
                   help="seconds one run may take (default: 5x the original's)")
    add_json(p, written)


def notifier(args: argparse.Namespace):
    """Progress lines on the terminal (silenced with the console under --quiet and --json)."""
    from bot.output import console
    return lambda msg: console.print(f"[dim]{msg}[/]", highlight=False)
