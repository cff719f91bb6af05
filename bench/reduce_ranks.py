"""Reduce the issue-29 corpus shapes (MANIFEST entries with "issue": 29) with `reprobot reduce
--jobs N` and report statements before/after against the hand floor, runs, wall time and the
machine's load.

    python bench/reduce_ranks.py [--jobs 2] [--max-time 600] [--only ddp_spawn_unused]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
            load0 = os.getloadavg()[0]
            t0 = time.monotonic()
            proc = subprocess.run(cmd, cwd=work, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                                  capture_output=True, text=True)
            wall = time.monotonic() - t0
            try:
                out = json.loads(proc.stdout[proc.stdout.index("{"):])
            except ValueError:
                out = {}
            # reduce prints the repro's paths as it was given --out: relative to its cwd
            repro_file = work / out["repro"] if out.get("repro") else None
            repro = repro_file.read_text() if repro_file is not None and repro_file.is_file() else ""
            if a.keep is not None:
                kept = a.keep / name
                shutil.rmtree(kept, ignore_errors=True)
                if out.get("repro_dir") and (work / out["repro_dir"]).is_dir():
                    shutil.copytree(work / out["repro_dir"], kept)
                kept.mkdir(parents=True, exist_ok=True)
                (kept / "stdout.txt").write_text(proc.stdout)
                (kept / "stderr.txt").write_text(proc.stderr)
            rows.append({"script": name, "exit": proc.returncode, "status": out.get("status"),
                         "before": out.get("statements_before"), "after": out.get("statements_after"),
                         "floor": e["ideal_statements"], "bound": e["max_statements"],
                         "runs": out.get("runs"), "wall_s": round(wall, 1),
                         "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
                         "target": (out.get("signature") or {}).get("one_line", "")[:120],
                         "repro": repro, "stderr_tail": proc.stderr[-1500:] if proc.returncode else ""})
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
