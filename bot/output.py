"""What reprobot shows on the terminal (rich), kept apart from what it computes."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from bot.scrub import scrub
from bot.store import ReproDir

console = Console(highlight=False, soft_wrap=False)
TAIL_LINES = 14


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
