"""Reduce the issue-29 corpus shapes (MANIFEST entries with "issue": 29) with `reprobot reduce
--jobs N` and report statements before/after against the hand floor, runs, wall time and the
machine's load.

    python bench/reduce_ranks.py [--jobs 2] [--max-time 600] [--only ddp_spawn_unused]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from reduce_run import run_reduce  # noqa: E402
CORPUS = ROOT / "bench" / "corpus"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--max-time", type=float, default=600)
    ap.add_argument("--only", default=None)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--keep", type=Path, default=None,
                    help="copy each run's repro folder (reduction.json, repro.py) and its output here")
    a = ap.parse_args()
    entries = [e for e in json.loads((CORPUS / "MANIFEST.json").read_text())["scripts"] if e.get("issue") == 29]
    rows = []
    for e in entries:
        name = Path(e["file"]).stem
        if a.only and name != a.only:
            continue
        with tempfile.TemporaryDirectory(prefix="reprobot-ranks-") as d:
            work = Path(d)
            shutil.copy(CORPUS / e["file"], work / e["file"])
            cmd = [a.python, "-m", "bot", "reduce", "--jobs", str(a.jobs), "--max-time", str(a.max_time),
                   "--no-env", "--json"]
            cmd += (["--", *e["launch"]] if e.get("launch") else [e["file"], "--", *e["args"]])
            run = run_reduce(cmd, work, ROOT)
            proc, out = run.proc, run.out
            repro = run.repro_text(work)
            if a.keep is not None:
                kept = a.keep / name
                shutil.rmtree(kept, ignore_errors=True)
                if out.get("repro_dir") and (work / out["repro_dir"]).is_dir():
                    shutil.copytree(work / out["repro_dir"], kept)
                kept.mkdir(parents=True, exist_ok=True)
                (kept / "stdout.txt").write_text(proc.stdout)
                (kept / "stderr.txt").write_text(proc.stderr)
            rows.append({"script": name, **run.row(), "floor": e["ideal_statements"], "bound": e["max_statements"],
                         "target": (out.get("signature") or {}).get("one_line", "")[:120], "repro": repro})
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
