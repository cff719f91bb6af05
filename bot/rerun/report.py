"""versions.json / contrast.json, their tables on the terminal, and the lines a draft takes from them."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

from rich.markup import escape
from rich.table import Table

from bot.output import console
from bot.store import ReproDir, write_json_atomic
from bot.rerun.contrast import Contrast, grouped
from bot.rerun.verdict import Kind, Verdict
from bot.rerun.versions import Bisection, Row, shown

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


def save_contrast(repro: ReproDir, results: list[Contrast], runs: int) -> dict:
    data = {"generated": _now(), "runs": runs, "changes": [r.to_dict() for r in results]}
    write_json_atomic(repro.path / "contrast.json", data)
    return data


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
            table.add_row(escape(r.label + (f" ({r.note})" if r.note else "")), *cells, f"[{_STYLE[r.verdict.kind]}]{escape(r.verdict.label())}[/]",
                          f"{r.seconds:.0f}s")
        console.print(table)
        return
    for r in rows:
        pins = " ".join(f"{n}={r.versions[n]}" for n in names if n in r.versions)
        print(f"{r.label:<22} {pins} | {r.verdict.label()} | {r.seconds:.0f}s", flush=True)


def print_contrast(results: list[Contrast]) -> None:
    groups = grouped(results)
    for title in ("passes", "changes it", "same failure"):
        items = groups[title]
        heading = {"passes": "makes it pass", "changes it": "changes the failure",
                   "same failure": "keeps the failure"}[title]
        console.print(f"[bold]{heading}[/] ({len(items)})", highlight=False)
        for c in items:
            extra = f" — {escape(c.verdict.detail)}" if title == "changes it" and c.verdict.detail else ""
            console.print(f"  line {c.change.line}: {escape(c.change.description)}{extra}", highlight=False)


@dataclass
class RerunNotes:
    """What versions.json and contrast.json add to a draft."""
    fails_on: list[str] = field(default_factory=list)     # "Still fails on transformers 5.23.0 (latest)"
    passes_on: list[str] = field(default_factory=list)    # "Passes on accelerate 1.14.0 (latest)"
    bisect: str | None = None
    works_with: list[str] = field(default_factory=list)   # contrast changes that make it pass

    @property
    def likely_fixed(self) -> bool:
        return bool(self.passes_on)

    @property
    def empty(self) -> bool:
        return not (self.fails_on or self.passes_on or self.bisect or self.works_with)

    def headline(self) -> str | None:
        if self.likely_fixed:
            return ("Passes on " + "; ".join(self.passes_on) +
                    " — likely fixed upstream: is filing still useful?")
        return None


def _versions_of(row: dict) -> str:
    changed = row.get("changed") or {}
    shown = row.get("versions") or {}
    names = list(changed) or list(shown)
    return " / ".join(f"{n} {shown.get(n, changed.get(n))}" for n in names)


def notes_for(repro: ReproDir) -> RerunNotes:
    notes = RerunNotes()
    path = repro.path / "versions.json"
    if path.is_file():
        data = repro.read_json(path)
        for row in data.get("rows", []):
            kind = Verdict.from_dict(row["verdict"]).kind
            if row["label"] == "locked":
                continue
            latest = "latest" in row["label"]
            where = _versions_of(row) + (" (latest)" if latest else "")
            if kind is Kind.PASS:
                notes.passes_on.append(where)
            elif kind is Kind.SAME and latest:
                notes.fails_on.append(where)
        if data.get("bisect") and data["bisect"].get("first_changed"):
            notes.bisect = data["bisect"]["sentence"]
    path = repro.path / "contrast.json"
    if path.is_file():
        data = repro.read_json(path)
        for ch in data.get("changes", []):
            if Verdict.from_dict(ch["verdict"]).kind is Kind.PASS:
                notes.works_with.append(ch["change"])
    return notes
