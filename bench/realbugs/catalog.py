"""The entries of bench/realbugs/ and the part each belongs to.

An entry is a folder `entries/<repo-short>-<number>/` with `script.py` and `entry.json`
(bench/realbugs/README.md gives the fields). Its part is fixed by its name when it is created,
by rule and not by choice: held-out when sha256(name) % 3 == 0. `heldout.json` and `train.json`
list the names; `register` appends a new name to the file its part says, re-reading the file
first because several people add entries at once.

A third part, `fresh` (`fresh.json`), is held out as a whole and the hash rule does not apply to
it: its entries were chosen after the first two parts had been measured and tuned on, among
issues that are in none of the sets reprobot reads (the classifier's labelled files under
bot/data/kind/ and the bundled issue index under bot/data/upstream/), and frozen before any fix
is measured on it. An entry joins it only when it is registered into it by name
(`register(name, "fresh")`, `check.py --record --fresh`).

Later parts, `fresh2`, `fresh3`, ... (`<part>.json`), were chosen the same way and under the same
rule, each once the one before it had been measured and was being tuned on, so that a clean
held-out part exists again; each is disjoint from every other part (`register(name, "fresh3")`,
`check.py --record --held-part fresh3`). They are data: CHOSEN lists them, and PART_FILES, the
parts check.py and run.py accept, is built from it, so a new part is one more name there.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENTRIES = HERE / "entries"
# the parts whose members are listed by choice of issue, not by the hash rule (each held out as a whole),
# oldest first: a new clean part is one more name here
CHOSEN: tuple[str, ...] = ("fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8", "fresh9")
HASHED: tuple[str, ...] = ("heldout", "train")
PART_FILES = {part: HERE / f"{part}.json" for part in (*HASHED, *CHOSEN)}


def hash_part(name: str) -> str:
    return "heldout" if int(hashlib.sha256(name.encode()).hexdigest(), 16) % 3 == 0 else "train"


def part_of(name: str) -> str:
    return next((part for part in CHOSEN if name in listed(part)), None) or hash_part(name)


def listed(part: str) -> list[str]:
    path = PART_FILES[part]
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []


def register(name: str, part: str | None = None) -> str:
    """Append `name` to its part's file (once); returns the part. The part is the hash rule's
    unless `part` is a chosen one (or `name` is already in one): the hash parts stay by rule."""
    if part not in (None, *CHOSEN):
        raise ValueError(f"{part!r}: only the {', '.join(CHOSEN)} parts are chosen; the others follow the hash rule")
    current = part_of(name)
    if part is None:
        part = current
    elif current != part and (current in CHOSEN or name in listed(current)):
        # measured (and maybe tuned on) already in another part: it cannot move after the fact
        raise ValueError(f"{name} is already in the {current} part")
    path = PART_FILES[part]
    names = listed(part)
    if name not in names:
        names.append(name)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(names, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)
    return part


def entry_names() -> list[str]:
    return sorted(p.name for p in ENTRIES.iterdir() if (p / "entry.json").is_file()) if ENTRIES.is_dir() else []


def load(name: str) -> dict:
    return json.loads((ENTRIES / name / "entry.json").read_text(encoding="utf-8"))


def script_of(name: str) -> Path:
    return ENTRIES / name / "script.py"


def select(names: list[str] | None = None, part: str | None = None) -> list[str]:
    """The names asked for (all entries when none), in one part when `part` is given."""
    chosen = list(names) if names else entry_names()
    unknown = [n for n in chosen if not (ENTRIES / n / "entry.json").is_file()]
    if unknown:
        raise ValueError(f"no such entry: {', '.join(unknown)}")
    if part is not None:
        members = set(listed(part))
        chosen = [n for n in chosen if n in members]
    return chosen


def markdown_table(names: list[str] | None = None) -> str:
    """The README's table of entries, from the entries themselves."""
    rows = ["| entry | part | repo | issue | verdict | fixed in | first passing (run) | fixed by "
            "| posted repro (statements) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in names or entry_names():
        e = load(name)
        dash = lambda v: "—" if v in (None, "", []) else str(v)  # noqa: E731
        rows.append(f"| {name} | {part_of(name)} | {e['repo']} | [#{e['number']}]({e['url']}) | {e['verdict']} "
                    f"| {dash(e.get('fixed_in'))} | {dash(e.get('first_passing_release'))} "
                    f"| {dash(e.get('fixed_by'))} | {dash(e.get('posted_repro_statements'))} |")
    return "\n".join(rows)


if __name__ == "__main__":
    # python bench/realbugs/catalog.py: the table for README.md
    print(markdown_table())
