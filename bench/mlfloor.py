"""The ML-floor benchmark (issue #38): `reprobot reduce` on Hugging Face-stack CPU scripts whose
failing call takes a model, a config, a tensor or a checkpoint, each against its hand floor.

    python bench/mlfloor.py [--part train|heldout|heldout2|...|heldout5|both|A,B] [--only NAME,...] [--max-time 600] [--jobs 2]
                            [--workdir DIR] [--json OUT] [--pin CPUS [--deadline S]]

Each part is a folder of bench/mlfloor/ with a MANIFEST.json: per script its launch line (if any),
which failure to keep (``pick``), and its hand floor (``NAME.floor.py``, written before any
reduction, its statement count in ``floor_statements``). The parts are reported separately:
``heldout`` was frozen before it was reduced and no pass is tuned on it. A script meets the goal
when its repro has at most 1.5 x the floor's statements within --max-time. Prints one row per
script and a summary per part; the exit status is 0 always (it measures, it does not judge).

``--pin 2`` on a machine with more cores runs scripts side by side, each confined to its own two
cores (``sched_setaffinity``), so one many-core machine measures "2 cores each" for several
scripts at once; memory bandwidth is still shared, which the figures' notes have to say.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "bench" / "mlfloor"
sys.path.insert(0, str(ROOT))
from bench.corpus_run import GOAL, judged, reduce_json  # noqa: E402


def run_one(part: str, entry: dict, workdir: Path, max_time: float, jobs: int,
            cpus: set[int] | None = None) -> dict:
    folder = HERE / part
    out = workdir / part / Path(entry["file"]).stem
    args = ["--out", str(out), "--jobs", str(jobs), "--max-time", str(max_time), "--no-env"]
    if entry.get("pick"):
        args += ["--pick", str(entry["pick"])]
    if entry.get("launch"):
        args += ["--", *entry["launch"], *entry.get("args", [])]
    else:
        args += [str(folder / entry["file"]), *(["--", *entry["args"]] if entry.get("args") else [])]
    # the affinity is inherited by every process the reduction starts (candidates, zygotes, children)
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc, result, wall = reduce_json(args, folder, max_time * 3 + 600, preexec_fn=pin)
    # the JSON's paths are scrubbed (a home folder becomes ~): the folder is the one under --out
    found = sorted(out.glob("*/reduction.json"))
    folder = str(found[0].parent) if found else result.get("repro_dir")
    reduction = Path(folder, "reduction.json") if folder else None
    log: dict = {}
    if reduction is not None and reduction.is_file():
        stats = json.loads(reduction.read_text(encoding="utf-8"))
        result["verified"] = stats.get("verified")
        # what the row alone cannot say afterwards (no log comes back from a device run): the
        # passes that ran (runs tried, accepted), the original's run time, warm vs cold children
        log = {"passes": {k: [v.get("tried"), v.get("accepted")] for k, v in stats.get("passes", {}).items()
                          if v.get("tried")},
               "original_s": stats.get("oracle_run_seconds"),
               "children": (stats.get("warm") or {}).get("children")}
    statements = result.get("statements_after")
    floor = int(entry["floor_statements"])
    row = {"part": part, "script": entry["file"], "floor": floor, "statements": statements,
           "cpus": sorted(cpus) if cpus else None,
           "exit": proc.returncode,
           "status": result.get("status"), "runs": result.get("runs"), "wall_s": round(wall, 1),
           "verified": result.get("verified"), "folder": folder}
    # the size the repro had at --max-time (a reduction stopped there keeps its best result; the
    # status column says whether it also finished and was verified cold)
    judged(row, floor, proc.returncode)
    if row["folder"] and Path(row["folder"], "repro.py").is_file():
        row["repro"] = Path(row["folder"], "repro.py").read_text(encoding="utf-8")
    if "error" in result:
        row["error"] = result["error"]
    row["log"] = log
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", default="both",
                   help="a part (train, heldout, heldout2, ..., heldout5) or several joined by commas; both: "
                        "train and heldout. Every part is reported on its own line")
    p.add_argument("--only", default="", help="comma-separated script names (without .py)")
    p.add_argument("--max-time", type=float, default=600)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--workdir", type=Path)
    p.add_argument("--json", type=Path)
    p.add_argument("--pin", type=int, default=0, metavar="CPUS",
                   help="run scripts side by side, each confined to its own CPUS cores")
    p.add_argument("--deadline", type=float, default=0, metavar="S",
                   help="with --pin: start a script only while it can end within S seconds of the start "
                        "(--max-time and a verification's margin); the rest are named 'not started', for "
                        "the next command (a device command is cut at 10 minutes, and a script cut there "
                        "leaves no row)")
    a = p.parse_args(argv)
    parts = ["heldout", "train"] if a.part == "both" else [x.strip() for x in a.part.split(",") if x.strip()]
    missing = [x for x in parts if not (HERE / x / "MANIFEST.json").is_file()]
    if missing:
        p.error(f"no such part: {', '.join(missing)}")
    only = {n.strip() for n in a.only.split(",") if n.strip()}
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="reprobot-mlfloor-"))
    todo = []
    for part in parts:
        manifest = json.loads((HERE / part / "MANIFEST.json").read_text(encoding="utf-8"))
        todo += [(part, e) for e in manifest["scripts"] if not only or Path(e["file"]).stem in only]
    rows = []

    def report(row: dict) -> None:
        rows.append(row)
        print(f"{row['part']:8} {row['script']:32} floor {row['floor']:>2}  result {row['statements'] or '-':>3}  "
              f"x{row['ratio'] or '-':<5} {'met' if row['goal_met'] else 'MISSED':6} {row['status'] or '':22} "
              f"runs {row['runs'] or '-':>4}  {row['wall_s']:>6.0f}s", flush=True)
        if a.json:
            a.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")

    if a.pin:
        skipped = _side_by_side(todo, workdir, a, report)
        if skipped:
            print("not started (the deadline): " + ",".join(Path(e["file"]).stem for _, e in skipped), flush=True)
    else:
        for part, entry in todo:
            report(run_one(part, entry, workdir, a.max_time, a.jobs))
    for part in parts:
        mine = [r for r in rows if r["part"] == part]
        if mine:
            met = sum(r["goal_met"] for r in mine)
            done = sum(r["goal_met"] and r["status"] == "done" for r in mine)
            print(f"{part}: {met}/{len(mine)} within {GOAL}x the hand floor at --max-time "
                  f"({done} of them finished and verified)")
    return 0


# what a reduction may run past --max-time: its best verified cold, alone (one or two original runs)
_VERIFY_MARGIN = 75.0


def _side_by_side(todo: list, workdir: Path, a: argparse.Namespace, report) -> list:
    """Each script on its own set of a.pin cores; a set is handed to the next script when free.
    The scripts not started because of ``a.deadline`` are returned."""
    import queue
    import threading
    import time
    cores = sorted(os.sched_getaffinity(0))
    free: queue.Queue = queue.Queue()
    for i in range(len(cores) // a.pin):
        free.put(set(cores[i * a.pin:(i + 1) * a.pin]))
    lock = threading.Lock()
    start = time.monotonic()
    skipped: list = []

    def one(part: str, entry: dict) -> None:
        cpus = free.get()
        try:
            if a.deadline and time.monotonic() - start + a.max_time + _VERIFY_MARGIN > a.deadline:
                with lock:
                    skipped.append((part, entry))
                return
            row = run_one(part, entry, workdir, a.max_time, a.jobs, cpus)
        finally:
            free.put(cpus)
        with lock:
            report(row)

    threads = [threading.Thread(target=one, args=item) for item in todo]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return skipped


if __name__ == "__main__":
    raise SystemExit(main())
