"""The pytest corpus (issue #43): `reprobot reduce NODE --jobs 2 --max-time 300 --no-env` on each
case, against its hand floor.

    python bench/pytests/measure.py --part train|heldout [--only NAME,...] [--max-time 300]
                                    [--jobs 2] [--workdir DIR] [--json OUT]

Each case folder holds the test module, its conftest.py, a pytest.ini (the folder is the
rootdir, as a user's project is), the hand floor `floor.py` and MANIFEST.json (the node id, the
arguments `reduce` is given when they are not the node id alone, e.g. `-k`, and the floor's
statements as bench/pytests/check_floors.py counted them). `reduce` runs in the case's folder.
Per case: the repro's statements against the floor's (reducer.analysis.size.count_statements), the status
and runs of the reduction, whether repro.py was verified alone (an empty folder, the Hub
offline), the failing test `reduce` reported (pytest.json), whether the floor fails with the
test's stored signature (bench/interesting.py's oracle), and the wall time. The parts are
reported separately; `heldout` is read once, after the code is done. Exit status 0 always.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
HERE = ROOT / "bench" / "pytests"
sys.path.insert(0, str(ROOT))
from bench.corpus_run import GOAL, folder_fields, judged, reduce_json  # noqa: E402


def cases(part: str) -> list[Path]:
    folder = HERE / "heldout" if part == "heldout" else HERE
    return sorted(p.parent for p in folder.glob("*/MANIFEST.json"))


def run_one(case: Path, workdir: Path, max_time: float, jobs: int) -> dict:
    from reducer.analysis.size import count_statements
    manifest = json.loads((case / "MANIFEST.json").read_text())
    out = workdir / case.name
    target = manifest.get("reduce_args") or [manifest["node"]]
    proc, result, wall = reduce_json([*target, "--out", str(out), "--jobs", str(jobs), "--max-time", str(max_time),
                                      "--no-env"], case, max_time * 3 + 900)
    found = sorted(out.glob("*/signature.json"))
    folder = found[0].parent if found else None
    floor_src = (case / "floor.py").read_text(encoding="utf-8")
    floor = count_statements(floor_src)
    row = {"case": case.name, "node": manifest["node"], "args": target, "floor": floor,
           "statements": result.get("statements_after"), "before": result.get("statements_before"),
           "status": result.get("status"), "runs": result.get("runs"), "exit": proc.returncode,
           "wall_s": round(wall, 1)}
    if folder is not None:
        fields, record = folder_fields(folder, floor_src, case / "floor.py", "pytest.json")
        row["failing_test"] = record.get("node")
        row["kept_as_functions"] = record.get("kept_as_functions")
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
    only = {n.strip() for n in a.only.split(",") if n.strip()}
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="reprobot-pytests-"))
    rows = []
    for case in cases(a.part):
        if only and case.name not in only:
            continue
        row = run_one(case, workdir, a.max_time, a.jobs)
        rows.append(row)
        print(f"{case.name:18} {row['before'] or '-':>3} -> {row['statements'] or '-':>3} stmts  floor {row['floor']:>2}  "
              f"x{row['ratio'] or '-':<5} {'met' if row['goal_met'] else 'MISSED':6} {row['status'] or '':18} "
              f"verified {row.get('verified')}  runs {row['runs'] or '-':>4}  {row['wall_s']:>5.0f}s  "
              f"test {row.get('failing_test')}  floor same signature {row.get('floor_same_signature')}"
              + (f"  error {row['error'][-200:]}" if row.get("error") else ""), flush=True)
        if a.json:
            a.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    met = sum(r["goal_met"] for r in rows)
    print(f"{a.part}: {met}/{len(rows)} within {GOAL}x the hand floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
