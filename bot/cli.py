"""The `reprobot` command line. Each subcommand lives in bot/commands/<name>.py."""
from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from typing import Sequence

from rich.markup import escape

from bot.commands import NAMES
from bot.output import err_console, quiet
from reducer.errors import ExitCode, ReprobotError, exit_table


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that subcommand's module is imported, so that
    `reprobot reduce` on a GPU box does not need PyGithub's crypto stack to start."""
    parser = argparse.ArgumentParser(
        prog="reprobot",
        description="Turn a failing Hugging Face script into a minimal repro and a ready-to-file issue.",
        epilog=f"Exit codes (every command): {exit_table()}.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in [only] if only in NAMES else NAMES:
        try:
            module = importlib.import_module(f"bot.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"bot.commands.{name}":
                raise
            continue  # a subcommand not built yet
        module.register(sub)
    for command in sub.choices.values():
        _add_quiet(command)
    return parser


def _add_quiet(p: argparse.ArgumentParser) -> None:
    """``--quiet`` under every command (and every ``index``/``action`` action), defined once
    here; ``--json`` implies it wherever a command has ``--json`` (stdout is the JSON)."""
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    for s in subs:
        for q in s.choices.values():
            _add_quiet(q)
    if not subs and "--quiet" not in p._option_string_actions:
        p.add_argument("--quiet", action="store_true", help="print nothing but errors (and --json)")


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI job cancelled, `kill`, a container stopping), taken down the same path as
    Ctrl-C: candidates and warm interpreters are stopped and the best result so far is saved."""


_TERMINATED = threading.Event()


def _on_sigterm(signum, frame) -> None:
    _TERMINATED.set()
    raise Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    previous = None
    _TERMINATED.clear()
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
    # Everything after "--" belongs to the user's script, never to reprobot.
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    try:
        # Inside the try: an option's type may reject a value with reprobot's own one-line
        # error (an unknown --repo KEY) rather than argparse's usage block.
        args = parser.parse_args(argv)
        args.passthrough = passthrough
        with quiet(bool(getattr(args, "quiet", False) or getattr(args, "json", False))):
            return int(args.func(args) or 0)
    except ReprobotError as e:
        err_console.print(f"[bold red]reprobot:[/] {escape(e.message)}", markup=True, highlight=False)
        if e.exit_code == ExitCode.INTERRUPTED and _TERMINATED.is_set():
            return ExitCode.TERMINATED
        return e.exit_code
    except Terminated:
        err_console.print("[bold red]reprobot:[/] terminated (SIGTERM)", markup=True)
        return ExitCode.TERMINATED
    except KeyboardInterrupt:
        err_console.print("[bold red]reprobot:[/] interrupted", markup=True)
        return ExitCode.INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
