"""Fit dedup's "likely duplicate" probability (bot/upstream/calibration.py) on the TRAIN part of
the labelled set, and write bot/data/dedup_calibration.json.

    python bench/calibrate_dedup.py [--precision 0.9] [--dry-run]

The index holds the train issues and the ends of the train pairs only; nothing of the held-out
part is read. Rows are dedup's top five for:
* each train issue re-reported (other path style, other numbers), once with itself indexed (it is
  the right answer) and once left out (only a stated duplicate is right);
* each end of each train pair, itself left out (the other end of a duplicate pair is right; a
  non-duplicate end is a negative).
A candidate is labelled right when it is the query itself or a stated duplicate of it (a train
pair labelled duplicate, or a duplicate link in a train issue's thread). The threshold is the
lowest probability at which the top candidates flagged on these rows are right ≥ --precision of
the time.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (str(ROOT), str(ROOT / "bench")):
    if extra not in sys.path:
        sys.path.insert(0, extra)

from upstream_eval import (_duplicates_of, _leaving_out, _reworded, build_index, evaluable, load,  # noqa: E402
                           load_pairs, ref, traceback_of)

from bot.upstream.calibration import fit, threshold_for, to_json  # noqa: E402
from bot.upstream.dedup import calibration_rows, dedup, query_of  # noqa: E402
from bot.upstream.failure import failure_from_text  # noqa: E402
from bot.upstream.route import route  # noqa: E402
from reducer.errors import ReprobotError  # noqa: E402

OUT = ROOT / "bot" / "data" / "dedup_calibration.json"


def _rows(index: Any, text: str, right: set[str]) -> list[tuple[list[float], bool, int]]:
    """(features, right?, rank) for dedup's top five on ``text``."""
    try:
        failure = failure_from_text(text)
    except ReprobotError:
        return []
    results = dedup(index, failure, target_repo=route(failure).target).results
    rows = calibration_rows(results, query_of(failure))
    return [(x, f"{r.repo}#{r.number}" in right, i) for i, (r, x) in enumerate(zip(results, rows, strict=True))]


def collect() -> list[tuple[list[float], bool, int]]:
    train, pairs = load("train"), load_pairs("train")
    issues = {ref(i): i for i in train}
    for p in pairs:
        issues.setdefault(ref(p["a"]), p["a"])
        issues.setdefault(ref(p["b"]), p["b"])
    same = _duplicates_of(list(issues.values()), pairs)
    rows: list[tuple[list[float], bool, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        index = build_index(Path(tmp) / "calibration.sqlite3", list(issues.values()))
        for issue in (i for i in train if evaluable(i)):
            text = traceback_of(_reworded(issue), "windows", "again" + ref(issue))
            rows += _rows(index, text, same.get(ref(issue), set()) | {ref(issue)})
            rows += _rows(_leaving_out(index, ref(issue)), text, same.get(ref(issue), set()))
        for p in pairs:
            for q in (p["a"], p["b"]):
                if evaluable(q):
                    text = traceback_of(q, "windows", "pair" + ref(q))
                    rows += _rows(_leaving_out(index, ref(q)), text, same.get(ref(q), set()))
        index.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision", type=float, default=0.9)
    ap.add_argument("--dry-run", action="store_true", help="print, do not write the file")
    args = ap.parse_args(argv)
    rows = collect()
    weights, bias = fit([(x, y) for x, y, _ in rows])
    from bot.upstream.calibration import Model

    m = Model(tuple(weights), bias, 0.0)
    tops = [(m.probability(x), y) for x, y, rank in rows if rank == 0]
    threshold = threshold_for(tops, args.precision)
    flagged = [y for p, y in tops if p >= threshold]
    about = {"fitted_on": "bot/data/upstream train part only (bench/calibrate_dedup.py)",
             "rows": len(rows), "positives": sum(y for _, y, _ in rows), "top_rows": len(tops),
             "train_flagged": len(flagged), "train_precision": round(sum(flagged) / len(flagged), 3) if flagged else None}
    text = to_json(weights, bias, threshold, about)
    print(text, end="")
    if not args.dry_run:
        OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
