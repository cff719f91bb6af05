"""The notebook corpus (issue #43): `reprobot reduce NB --jobs 2 --max-time 300 --no-env` on each
notebook, against its hand floor.

    python bench/notebooks/measure.py --part train|heldout [--only NAME,...] [--max-time 300]
                                      [--jobs 2] [--workdir DIR] [--json OUT]

Per notebook: the repro's statements against the floor's (reducer.analysis.size.count_statements), the
status and runs of the reduction, whether repro.py was verified alone (an empty folder, the Hub
offline), the cell the command reported as failing, and whether the floor fails with the
notebook's signature (bench/interesting.py's oracle on the notebook's stored signature). The
parts are reported separately; `heldout` is read once, after the code is done. Exit status 0
always (it measures, it does not judge).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
HERE = ROOT / "bench" / "notebooks"
sys.path.insert(0, str(ROOT))
from bench.corpus_run import GOAL, folder_fields, judged, reduce_json  # noqa: E402


def run_one(nb: Path, workdir: Path, max_time: float, jobs: int) -> dict:
    from reducer.analysis.size import count_statements
    out = workdir / nb.stem
    proc, result, wall = reduce_json([str(nb), "--out", str(out), "--jobs", str(jobs), "--max-time", str(max_time),
                                      "--no-env"], nb.parent, max_time * 3 + 600)
    found = sorted(out.glob("*/signature.json"))
    folder = found[0].parent if found else None
    floor_src = (nb.parent / f"{nb.stem}.floor.py").read_text(encoding="utf-8")
    floor = count_statements(floor_src)
    row = {"notebook": nb.name, "floor": floor, "statements": result.get("statements_after"),
           "before": result.get("statements_before"), "status": result.get("status"), "runs": result.get("runs"),
           "exit": proc.returncode, "wall_s": round(wall, 1)}
    if folder is not None:
        fields, record = folder_fields(folder, floor_src, nb, "notebook.json")
        row["failing_cell"] = (record.get("failing_cell") or {}).get("cell")
        row["saved_error_cell"] = (record.get("saved_error") or {}).get("cell")
        row.update(fields)
    if "error" in result:
        row["error"] = result["error"]
    return judged(row, floor, proc.returncode)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("train", "heldout"), required=True)
    p.add_argument("--only", default="")
    p.add_argument("--max-time", type=float, default=300)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--workdir", type=Path)
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    folder = HERE / ("" if a.part == "train" else "heldout")
    only = {n.strip() for n in a.only.split(",") if n.strip()}
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="reprobot-notebooks-"))
    rows = []
    for nb in sorted(folder.glob("*.ipynb")):
        if only and nb.stem not in only:
            continue
        row = run_one(nb, workdir, a.max_time, a.jobs)
        rows.append(row)
        print(f"{nb.stem:20} {row['before'] or '-':>3} -> {row['statements'] or '-':>3} stmts  floor {row['floor']:>2}  "
              f"x{row['ratio'] or '-':<5} {'met' if row['goal_met'] else 'MISSED':6} {row['status'] or '':18} "
              f"verified {row.get('verified')}  runs {row['runs'] or '-':>4}  {row['wall_s']:>5.0f}s  "
              f"cell {row.get('failing_cell')} (saved {row.get('saved_error_cell')})  "
              f"floor same signature {row.get('floor_same_signature')}", flush=True)
        if a.json:
            a.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    met = sum(r["goal_met"] for r in rows)
    print(f"{a.part}: {met}/{len(rows)} within {GOAL}x the hand floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
