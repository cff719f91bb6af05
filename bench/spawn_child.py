"""Reduce a script whose failure lives in a spawn child with `reprobot reduce --jobs N`, with this
checkout and, side by side in the same run, with an earlier revision (a temporary git worktree),
and print statements before/after, runs, wall time, which prelude passes were accepted and the
machine's load around each reduction.

    python bench/spawn_child.py [--script examples/cpu_gemma4_lora/spawn_lora_worker.py]
                                [--base REV] [--jobs 2] [--max-time 900] [--floor 5]

The reductions run one after the other, never at once: on a 2-core machine the second would
slow the first. Compare their ratio, not their seconds, across runs.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from reduce_run import run_reduce  # noqa: E402


def reduce_once(code_root: Path, script: Path, jobs: int, max_time: float, python: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="reprobot-spawn-") as d:
        work = Path(d)
        shutil.copy(script, work / script.name)
        cmd = [python, "-m", "bot", "reduce", script.name, "--jobs", str(jobs), "--max-time", str(max_time),
               "--no-env", "--json", "--out", str(work / "out")]
        run = run_reduce(cmd, work, code_root)
        stats: dict = {}
        found = list((work / "out").glob("*/reduction.json"))
        if found:
            stats = json.loads(found[0].read_text())
        passes = stats.get("passes", {})
        return {**run.row(),
                "prelude_accepted": {p: passes.get(p, {}).get("accepted", 0)
                                     for p in ("bring_home", "boundary_call", "first_cut")},
                "warm": stats.get("warm"), "repro": run.repro_text(work)}

def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", default=str(ROOT / "examples/cpu_gemma4_lora/spawn_lora_worker.py"))
    ap.add_argument("--base", default=None, help="an earlier revision to reduce with too, in the same run")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--max-time", type=float, default=900)
    ap.add_argument("--floor", type=int, default=5, help="the hand floor, in statements")
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    script = Path(a.script).resolve()
    rows = {"script": script.name, "floor": a.floor, "cpus": os.cpu_count()}
    if a.base:
        with tempfile.TemporaryDirectory(prefix="reprobot-base-") as d:
            base = Path(d) / "tree"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), a.base],
                           check=True, capture_output=True)
            try:
                rows[f"base {a.base}"] = reduce_once(base, script, a.jobs, a.max_time, a.python)
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                               capture_output=True)
    rows["this checkout"] = reduce_once(ROOT, script, a.jobs, a.max_time, a.python)
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
