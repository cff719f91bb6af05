"""Bug / usage / environment on the labelled set (bot/data/kind/): accuracy, and usage-error
precision and recall, per part. Rules are developed with --train-only; the held-out part
(heldout_v6) is read only to report, and its misses are never listed (bot/data/kind/README.md).

    python bench/kind_eval.py [--train-only] [--misses]

Train includes the earlier held-out parts (rows with origin heldout-v1 .. heldout-v5), each read
once its rules were written; each is also reported on its own line, e.g. `train[heldout-v2]`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.split_kind import DATA, HELD_OUT  # noqa: E402
from bot.upstream.kind import USAGE, Evidence, classify, frames_from_strings  # noqa: E402


def evidence(row: dict) -> Evidence:
    # The labelled rows hold the user's API call without its arguments, and no contrast run.
    return Evidence(row["exc_type"], row["message"], frames_from_strings(row.get("frames") or []),
                    row.get("entry_call") or None)


def score(rows: list[dict]) -> dict:
    got = [(r, classify(evidence(r))) for r in rows]
    right = sum(k.kind == r["label"] for r, k in got)
    said_usage = [(r, k) for r, k in got if k.kind == USAGE]
    true_usage = [r for r in rows if r["label"] == USAGE]
    tp = sum(r["label"] == USAGE for r, _ in said_usage)
    confusion: dict[str, dict[str, int]] = {}
    for r, k in got:
        confusion.setdefault(r["label"], {}).setdefault(k.kind, 0)
        confusion[r["label"]][k.kind] += 1
    return {"n": len(rows), "accuracy": round(right / len(rows), 2) if rows else None, "right": right,
            "usage_precision": round(tp / len(said_usage), 2) if said_usage else None,
            "usage_recall": round(tp / len(true_usage), 2) if true_usage else None,
            "usage_said": len(said_usage), "usage_true": len(true_usage), "usage_hits": tp,
            "confusion": confusion, "_got": got}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-only", action="store_true")
    ap.add_argument("--misses", action="store_true", help="list the train part's misses")
    args = ap.parse_args(argv)
    parts = ["train"] if args.train_only else ["train", HELD_OUT]
    for part in parts:
        path = DATA / f"{part}.jsonl"
        if not path.is_file():
            print(f"kind_eval: no such part: {path}", file=sys.stderr)
            return 2
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        s = score(rows)
        got = s.pop("_got")
        print(f"{part}: " + json.dumps(s))
        if part == "train":
            for origin in sorted({r["origin"] for r in rows if r.get("origin")}):
                sub = score([r for r in rows if r.get("origin") == origin])
                sub.pop("_got")
                print(f"train[{origin}]: " + json.dumps(sub))
        if args.misses and part == "train":
            for r, k in got:
                if k.kind != r["label"]:
                    print(f"  miss {r['repo']}#{r['number']}: {r['label']} -> {k.kind} ({k.reason[:120]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
