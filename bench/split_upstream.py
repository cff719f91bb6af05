"""Add gathered issues and duplicate/non-duplicate pairs to the labelled set, each to the part
its seeded hash assigns (bot/data/upstream/README.md). The assignment depends on nothing but the
issue's (or pair's) identity, so it is fixed before any rule is written against the new data.

    python bench/split_upstream.py --issues new-issues.jsonl --pairs new-pairs.jsonl

Issues already in the set are left as they are; every text field passes through reprobot's
scrubber. Pair ends that are not in the set yet join it as issues too.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.scrub import scrub_json  # noqa: E402

DATA = ROOT / "bot" / "data" / "upstream"
HELD_OUT_SHARE = 0.35
ISSUE_SALT = "reprobot-13-split"
PAIR_SALT = "reprobot-13-pairs"
KEYS = ("repo", "number", "state", "title", "created", "exc_type", "message", "frames", "entry_call", "fixed_by",
        "fixed_in", "duplicate_of", "where_fixed_repo", "evidence")


def _fraction(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) / 16 ** 64


def ref(issue: dict[str, Any]) -> str:
    return f"{issue['repo']}#{issue['number']}"


def issue_part(issue: dict[str, Any]) -> str:
    return "heldout" if _fraction(f"{ISSUE_SALT}:{ref(issue)}") < HELD_OUT_SHARE else "train"


def pair_key(pair: dict[str, Any]) -> str:
    return "|".join(sorted((ref(pair["a"]), ref(pair["b"]))))


def pair_part(pair: dict[str, Any]) -> str:
    return "heldout" if _fraction(f"{PAIR_SALT}:{pair_key(pair)}") < HELD_OUT_SHARE else "train"


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _clean(issue: dict[str, Any]) -> dict[str, Any]:
    out = {k: issue.get(k) for k in KEYS}
    for k in ("frames", "fixed_by", "duplicate_of"):
        out[k] = list(out[k] or [])
    out["evidence"] = out["evidence"] or ""
    out["number"] = int(out["number"])
    return scrub_json(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--issues", type=Path, action="append", default=[])
    ap.add_argument("--pairs", type=Path, action="append", default=[])
    args = ap.parse_args(argv)
    parts = {p: _read(DATA / f"{p}.jsonl") for p in ("train", "heldout")}
    known = {ref(i) for rows in parts.values() for i in rows}
    pairs = {p: _read(DATA / f"pairs_{p}.jsonl") for p in ("train", "heldout")}
    known_pairs = {pair_key(x) for rows in pairs.values() for x in rows}
    added = {"issues": 0, "pairs": 0}

    def add_issue(issue: dict[str, Any]) -> None:
        if ref(issue) in known:
            return
        known.add(ref(issue))
        parts[issue_part(issue)].append(_clean(issue))
        added["issues"] += 1

    for path in args.issues:
        for issue in _read(path):
            add_issue(issue)
    for path in args.pairs:
        for pair in _read(path):
            if pair["label"] not in ("duplicate", "not_duplicate") or pair_key(pair) in known_pairs:
                continue
            known_pairs.add(pair_key(pair))
            row = {"label": pair["label"], "a": _clean(pair["a"]), "b": _clean(pair["b"]),
                   "evidence": scrub_json(pair.get("evidence") or ""), "source_url": pair.get("source_url") or ""}
            pairs[pair_part(pair)].append(row)
            added["pairs"] += 1
            add_issue(pair["a"])
            add_issue(pair["b"])
    for p in ("train", "heldout"):
        parts[p].sort(key=lambda i: (i["repo"], i["number"]))
        _write(DATA / f"{p}.jsonl", parts[p])
        _write(DATA / f"pairs_{p}.jsonl", pairs[p])
    print(json.dumps({"added": added, **{f"{p}_issues": len(parts[p]) for p in parts},
                      **{f"pairs_{p}": len(pairs[p]) for p in pairs}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
