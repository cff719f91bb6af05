"""Reducer CPU per candidate as the script grows: 200, 1,000 and 5,000 lines.

    python bench/reducer_cpu.py                       # 200, 1000, 5000 lines, 600 s each
    python bench/reducer_cpu.py --lines 1000 --max-time 300 --json out.json

Each script is generated: many small helpers, each called once from ``main`` (and each writing
to a module-level dict, so none is dead code), then the failure at the end in ``json.loads``.
The hand-minimal repro is 2 statements. `reprobot reduce --cold --no-env --max-time T` reduces
it; reduction.json gives the runs, the candidates proposed (run or refused without a run) and
``reducer_cpu``: the CPU time of reprobot's own process (the passes, the gate, reading
outputs), candidates excluded. The goal is at most 1 s of reducer CPU per candidate run at
5,000 lines, and the script reduced to its few statements in minutes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generate(lines: int) -> str:
    """A script of about ``lines`` lines: helpers of 5 lines plus one call line each in main."""
    helpers = max(1, (lines - 12) // 6)
    out = ["import json", "", "STATE = {}", ""]
    for i in range(helpers):
        out += [f"def helper_{i}(x):", f"    y = x + {i}", f"    STATE['h{i}'] = y", "    return y", ""]
    out += ["def main():", "    total = 0"]
    out += [f"    total += helper_{i}({i})" for i in range(helpers)]
    out += ["    print(total, len(STATE))", "    json.loads('{\"a\": 1,}')", "", "", "main()", ""]
    return "\n".join(out)


def measure(lines: int, max_time: float, work: Path) -> dict:
    folder = work / f"lines{lines}"
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / f"gen{lines}.py"
    script.write_text(generate(lines), encoding="utf-8")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", script.name, "--cold", "--no-env",
                           "--max-time", str(max_time), "--out", "repros", "--quiet"],
                          cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.monotonic() - t0
    found = list((folder / "repros").glob("*/reduction.json"))
    if not found:
        return {"lines": lines, "error": (proc.stderr or proc.stdout)[-500:], "exit": proc.returncode}
    red = json.loads(found[0].read_text(encoding="utf-8"))
    runs, proposed, cpu = red.get("runs") or 0, red.get("proposed") or 0, red.get("reducer_cpu") or 0.0
    return {"lines": len(script.read_text().splitlines()), "exit": proc.returncode, "status": red.get("status"),
            "statements": f"{red.get('statements_before')} -> {red.get('statements_after')}",
            "command_wall_s": round(wall, 1), "reduction_wall_s": red.get("wall_time"), "runs": runs,
            "proposed": proposed, "reducer_cpu_s": cpu,
            "cpu_per_run_s": round(cpu / runs, 3) if runs else None,
            "cpu_per_proposed_s": round(cpu / proposed, 4) if proposed else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", default="200,1000,5000", help="comma-separated sizes (default: 200,1000,5000)")
    ap.add_argument("--max-time", type=float, default=600.0, help="seconds per reduction (default: 600)")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the scripts and repro folders here")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here too")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="reprobot-cpu-"))
    rows = []
    cols = ["lines", "status", "statements", "reduction_wall_s", "runs", "proposed", "reducer_cpu_s",
            "cpu_per_run_s", "cpu_per_proposed_s"]
    print(" | ".join(cols), flush=True)
    for n in (int(x) for x in args.lines.split(",")):
        row = measure(n, args.max_time, work)
        rows.append(row)
        print(" | ".join(str(row.get(c, row.get("error", ""))) for c in cols), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    print(f"(scripts and repro folders in {work}; load: {os.getloadavg()[0]:.2f} at the end)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
