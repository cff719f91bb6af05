"""versions.json / contrast.json: writing them and their tables on the terminal (what a draft
reads back from them is bot/store.py's ``rerun_notes``)."""
from __future__ import annotations

import datetime as _dt

from rich.markup import escape
from rich.table import Table

from bot.output import console
from bot.store import ReproDir, write_json_atomic
from bot.rerun.contrast import Contrast, grouped, handback_line
from bot.rerun.verdict import Kind, Verdict
from bot.rerun.versions import Bisection, Row, original_words, shown

_STYLE = {Kind.PASS: "bold green", Kind.SAME: "red", Kind.DIFFERENT: "yellow", Kind.TIMEOUT: "yellow",
          Kind.NOT_INSTALLABLE: "dim", Kind.ERROR: "dim"}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def save_versions(repro: ReproDir, rows: list[Row], bisection: Bisection | None, python: str, runs: int) -> dict:
    data = {"generated": _now(), "python": python, "runs": runs,
            "rows": [r.to_dict() for r in rows],
            "bisect": bisection.to_dict() if bisection else None}
    write_json_atomic(repro.path / "versions.json", data)
    return data


def save_contrast(repro: ReproDir, results: list[Contrast], runs: int, planned: int | None = None,
                  stopped: str | None = None, handback: list[dict] | None = None) -> dict:
    """``planned``: the changes contrast means to run (more than ``results`` while it runs, or
    after a stop); ``stopped``: the line saying it stopped and after how many; ``handback``: what the
    traced run found the library failed on among the values the repro's functions returned to it
    (bot/rerun/contrast.py's ``handed_back``)."""
    data = {"generated": _now(), "runs": runs, "planned": len(results) if planned is None else planned,
            "stopped": stopped, "changes": [r.to_dict() for r in results], "handback": list(handback or [])}
    write_json_atomic(repro.path / "contrast.json", data)
    return data


def outcome(row: Row) -> str:
    """The row's outcome in words: the repro's verdict, then the user's script's where it ran."""
    by_user = original_words(row.original, row.verdict)
    return row.verdict.label() + (f" — {by_user}" if by_user else "")


def print_rows(rows: list[Row]) -> None:
    names = [n for n in shown() if any(n in r.versions for r in rows)]
    if console.is_terminal:
        table = Table(title="the repro against other releases")
        table.add_column("row")
        for n in names:
            table.add_column(n)
        table.add_column("outcome")
        table.add_column("time", justify="right")
        for r in rows:
            cells = [(f"[bold]{escape(r.versions[n])}[/]" if n in r.changed else escape(r.versions.get(n, "-")))
                     for n in names]
            # coloured by what the row says about the failure (the user's script's pass is a pass)
            table.add_row(escape(r.label + (f" ({r.note})" if r.note else "")), *cells,
                          f"[{_STYLE[r.judged.kind]}]{escape(outcome(r))}[/]", f"{r.seconds:.0f}s")
        console.print(table)
        return
    for r in rows:
        pins = " ".join(f"{n}={r.versions[n]}" for n in names if n in r.versions)
        console.print(f"{r.label:<22} {pins} | {outcome(r)} | {r.seconds:.0f}s", markup=False)


def print_contrast(results: list[Contrast], handback: list[dict] | None = None) -> None:
    for found in handback or []:
        console.print(handback_line(found), markup=False, highlight=False)
    groups = grouped(results)
    for title in ("passes", "changes it", "same failure"):
        items = groups[title]
        heading = {"passes": "makes it pass", "changes it": "changes the failure",
                   "same failure": "keeps the failure"}[title]
        console.print(f"[bold]{heading}[/] ({len(items)})", highlight=False)
        for c in items:
            extra = f" — {escape(c.verdict.detail)}" if title == "changes it" and c.verdict.detail else ""
            console.print(f"  line {c.change.line}: {escape(c.change.description)}{extra}", highlight=False)
