"""Add labelled issues to the bug / usage / environment set (bot/data/kind/), each to the part its
seeded hash assigns. The assignment depends on nothing but the issue's identity, so a held-out
issue is held out before any rule is written against it (bot/data/kind/README.md).

    python bench/split_kind.py --issues gathered.jsonl

Parts: `train.jsonl` and `heldout_v6.jsonl`. Each earlier held-out part was read once its rules
were written, so it was folded into train (rows keep `origin: heldout-v1` .. `heldout-v5`) and the
next held-out part is drawn with its own salt from issues gathered after that, by people who never
wrote or ran a rule; every issue added from now on is assigned by the v6 salt.

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
# All of round 6, as in rounds 4 and 5: the rules are written on the issues of rounds 1-5, and every
# new issue makes the held-out figure less noisy.
HELD_OUT_SHARE = 1.0
SALT = "reprobot-30-kind-v6"
HELD_OUT = "heldout_v6"
SEEN = ("heldout", "heldout_v2", "heldout_v3", "heldout_v4", "heldout_v5")   # earlier held-out parts, read, so folded into train
PARTS = ("train", HELD_OUT)
LABELS = ("bug", "usage", "environment")
KEYS = ("repo", "number", "title", "exc_type", "message", "frames", "entry_call", "label", "evidence", "source")


def part(issue: dict[str, Any]) -> str:
    return HELD_OUT if _fraction(f"{SALT}:{ref(issue)}") < HELD_OUT_SHARE else "train"


def _fold_seen(parts: dict[str, list[dict[str, Any]]]) -> int:
    """Move the held-out parts already read into train, each row marked by the part it came from."""
    moved = 0
    for name in SEEN:
        old = DATA / f"{name}.jsonl"
        rows = _read(old)
        origin = "heldout-v1" if name == "heldout" else name.replace("_", "-")
        for row in rows:
            row.setdefault("origin", origin)
            parts["train"].append(row)
        if old.exists():
            old.unlink()
        moved += len(rows)
    return moved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--issues", type=Path, action="append", default=[])
    args = ap.parse_args(argv)
    DATA.mkdir(parents=True, exist_ok=True)
    parts = {p: _read(DATA / f"{p}.jsonl") for p in PARTS}
    folded = _fold_seen(parts)
    known = {ref(i) for rows in parts.values() for i in rows}
    added = 0
    for path in args.issues:
        if not path.is_file():
            print(f"split_kind: no such file: {path}", file=sys.stderr)
            return 2
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
    print(json.dumps({"added": added, "folded_into_train": folded, **counts}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
