"""How far the labelled set lets a router or a deduplicator that reads only the failure go (#13).

    python bench/label_ceiling.py [--part train|heldout|both]

Aggregates of the labels only, no rule involved:

* routing: of the issues whose thread shows library frames, how many have their truth repository
  (where the fix landed, else where the issue was kept) among the packages in those frames: a
  router that names a package of the traceback cannot be right more often than that;
* dedup: of the duplicate-pair queries (an end with an error line), how many have the same
  exception type and error line as the other end (after the index's normalisation): the pairs a
  failure-only ranker can tell apart from the rest by the failure itself.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for extra in (str(ROOT), str(ROOT / "bench")):
    if extra not in sys.path:
        sys.path.insert(0, extra)

from upstream_eval import evaluable, load, load_pairs, truth  # noqa: E402

from bot.upstream.index import normalized  # noqa: E402

def routing_ceiling(issues: list[dict]) -> tuple[int, int]:
    framed = [i for i in issues if evaluable(i) and i.get("frames")]
    on_path = sum(truth(i).split("/")[1] in {f.split("/")[0] for f in i["frames"]} for i in framed)
    return on_path, len(framed)


def dedup_ceiling(pairs: list[dict]) -> tuple[int, int]:
    same = n = 0
    for p in pairs:
        if p["label"] != "duplicate":
            continue
        for q, other in ((p["a"], p["b"]), (p["b"], p["a"])):
            if not evaluable(q):
                continue
            n += 1
            same += bool(evaluable(other) and q["exc_type"].rsplit(".", 1)[-1] == other["exc_type"].rsplit(".", 1)[-1]
                         and normalized(q["message"]) == normalized(other["message"]))
    return same, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("train", "heldout", "both"), default="train")
    args = ap.parse_args(argv)
    for part in (("train", "heldout") if args.part == "both" else (args.part,)):
        on, framed = routing_ceiling(load(part))
        same, n = dedup_ceiling(load_pairs(part))
        print(f"{part:8s} routing: truth repository among the traceback's packages in {on}/{framed} issues with "
              f"frames ({on / framed:.2f})")
        print(f"{'':8s} dedup: duplicate-pair queries whose other end has the same error line: {same}/{n} "
              f"({same / n:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
