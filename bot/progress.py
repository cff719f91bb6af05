"""Progress fitted to where it goes: a live bar on a terminal; on a log (CI, `| tee`) plain
lines, at each accepted step of a reduction and otherwise at most every PLAIN_EVERY seconds."""
from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn

from reducer.search.driver import Progress

PLAIN_EVERY = 30.0


class ReductionProgress:
    def __init__(self, console: Console, start_tokens: int, every: float = PLAIN_EVERY) -> None:
        self.console, self.start_tokens, self.every = console, start_tokens, every
        self._bar: RichProgress | None = None
        self._task = None
        self._last_line = 0.0
        self._last_accepted = -1

    def __enter__(self) -> "ReductionProgress":
        if self.console.is_terminal:
            self._bar = RichProgress(
                TextColumn("[bold]{task.fields[pass_name]:<18}"), BarColumn(bar_width=24),
                TextColumn("{task.fields[tokens]} tokens · runs {task.fields[runs]} · "
                           "kept {task.fields[accepted]} · cache {task.fields[hits]}"),
                TimeElapsedColumn(), console=self.console, transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task("reduce", total=self.start_tokens, pass_name="start",
                                            tokens=self.start_tokens, runs=0, accepted=0, hits=0)
        return self

    def update(self, p: Progress) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self.start_tokens - p.size_now.tokens, pass_name=p.pass_name,
                             tokens=p.size_now.tokens, runs=p.runs, accepted=p.accepted, hits=p.cache_hits)
            return
        if self.console.quiet:
            return
        now = time.monotonic()
        if p.accepted != self._last_accepted or now - self._last_line >= self.every:
            self._last_accepted, self._last_line = p.accepted, now
            print(f"[reduce {p.elapsed:6.0f}s] {p.pass_name}: {p.size_now.tokens} tokens "
                  f"(from {p.size_start.tokens}), runs {p.runs}, kept {p.accepted}, cache hits {p.cache_hits}",
                  file=self.console.file, flush=True)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


class SyncProgress:
    """An issue sync, page by page: a live line on a terminal, a plain line every PLAIN_EVERY
    seconds on a log, nothing for ``--json`` (``console`` None)."""

    def __init__(self, console: Console | None, every: float = PLAIN_EVERY) -> None:
        self.console, self.every = console, every
        self._status = None
        self._last_line = time.monotonic()

    def __enter__(self) -> "SyncProgress":
        return self

    def update(self, stats) -> None:
        text = f"syncing {stats.repo}: page {stats.pages}, {stats.fetched} issue(s)/PR(s) (up to {stats.watermark})"
        if self.console is None or self.console.quiet:
            return
        if self.console.is_terminal:
            if self._status is None:
                self._status = self.console.status(text)
                self._status.__enter__()
            else:
                self._status.update(text)
            return
        now = time.monotonic()
        if stats.pages == 1 or now - self._last_line >= self.every:
            self._last_line = now
            print(f"[dedup] {text}", file=self.console.file, flush=True)

    def __exit__(self, *exc) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)
