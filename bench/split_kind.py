"""Add labelled issues to the bug / usage / environment set (bot/data/kind/), each to the part its
seeded hash assigns. The assignment depends on nothing but the issue's identity, so a held-out
issue is held out before any rule is written against it (bot/data/kind/README.md).

    python bench/split_kind.py --issues gathered.jsonl

Issues already in the set are left as they are; text fields pass through reprobot's scrubber.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.split_upstream import _fraction, _read, _write, ref  # noqa: E402
from bot.scrub import scrub_json  # noqa: E402

DATA = ROOT / "bot" / "data" / "kind"
HELD_OUT_SHARE = 0.35
SALT = "reprobot-30-kind"
LABELS = ("bug", "usage", "environment")
KEYS = ("repo", "number", "title", "exc_type", "message", "frames", "entry_call", "label", "evidence", "source")


def part(issue: dict[str, Any]) -> str:
    return "heldout" if _fraction(f"{SALT}:{ref(issue)}") < HELD_OUT_SHARE else "train"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--issues", type=Path, action="append", default=[])
    args = ap.parse_args(argv)
    DATA.mkdir(parents=True, exist_ok=True)
    parts = {p: _read(DATA / f"{p}.jsonl") for p in ("train", "heldout")}
    known = {ref(i) for rows in parts.values() for i in rows}
    added = 0
    for path in args.issues:
        for issue in _read(path):
            if ref(issue) in known or issue.get("label") not in LABELS:
                continue
            known.add(ref(issue))
            row = {k: issue.get(k) for k in KEYS}
            row["frames"] = list(row["frames"] or [])
            row["number"] = int(row["number"])
            parts[part(issue)].append(scrub_json(row))
            added += 1
    for p, rows in parts.items():
        rows.sort(key=lambda i: (i["repo"], i["number"]))
        _write(DATA / f"{p}.jsonl", rows)
    counts = {p: {lab: sum(r["label"] == lab for r in rows) for lab in LABELS} for p, rows in parts.items()}
    print(json.dumps({"added": added, **counts}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
