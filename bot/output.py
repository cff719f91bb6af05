"""What reprobot shows on the terminal (rich), kept apart from what it computes.

The only rich Consoles live here: ``console`` for everything a command reports (stdout) and
``err_console`` for the one-line errors (stderr). Every command prints through them, so the
CLI's ``--quiet`` and ``--json`` (see ``quiet``) silence every command the same way; errors
and a command's JSON answer (plain ``print``) are never silenced. tests/test_cli_wiring.py
checks that no other module creates a Console.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.prompt import Confirm

from bot.scrub import scrub
from bot.store import ReproDir

# soft_wrap: a long line (a command to run, a URL) stays whole in a log, where it is grepped.
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)
TAIL_LINES = 14


@contextmanager
def quiet(on: bool) -> Iterator[None]:
    """``--quiet`` / ``--json``: nothing but errors (and the JSON, which commands ``print``)
    while the command runs; restored afterwards, so a test calling main() twice sees both."""
    before = console.quiet
    console.quiet = on or before
    try:
        yield
    finally:
        console.quiet = before


def say(text: str) -> None:
    """A plain line of progress or a table row for a log: silenced with the console."""
    if not console.quiet:
        print(text, flush=True)


def ask(question: str) -> bool:
    """A yes/no question a person must see, even under --quiet (a prompt nobody can read would
    wait forever). Defaults to no."""
    before = console.quiet
    console.quiet = False
    try:
        return Confirm.ask(question, default=False, console=console)
    finally:
        console.quiet = before


def traceback_tail(text: str, lines: int = TAIL_LINES) -> str:
    rows = text.rstrip().splitlines()
    if len(rows) <= lines:
        return "\n".join(rows)
    return "\n".join(["  ...", *rows[-lines:]])


def print_failure(failure, repro: ReproDir) -> None:
    sig = failure.signature
    runs = len(failure.outcomes)
    rate = getattr(failure, "rate", None)
    how = (f"reproduced {runs}/{runs} runs" if rate is None or rate.deterministic else
           f"flaky: {rate.words()}" + (f"; every time with random seed {failure.seed}"
                                       if failure.seed is not None else ""))
    console.print(f"[bold]failure[/] [cyan]{sig.id}[/]  ({how}, {failure.wall_time:.1f}s per run)")
    console.print(f"  {escape(scrub(sig.one_line()).text)}")
    if len(failure.choices) > 1:
        console.print(f"the run showed {len(failure.choices)} distinct failures (choose with --pick N):")
        for n, (s, _) in enumerate(failure.choices, 1):
            mark = "[bold green]→[/]" if s == sig else " "
            console.print(f" {mark} {n}. [cyan]{s.id}[/] {escape(scrub(s.one_line()).text)[:160]}")
    console.print(Panel(escape(scrub(traceback_tail(failure.record.text)).text), title="traceback (tail)",
                        expand=False))
    console.print(f"stored in [bold]{escape(str(repro.path))}/[/]")
