"""Candidates on Ray against local slots, side by side in one run (issue #34).

    python bench/ray_throughput.py                                   # corpus script + quick_lora
    python bench/ray_throughput.py --scripts bench/corpus/constants_dead_code.py --json out.json

For each script, three engines with the same number of slots (--slots, default 2):

* ``local``:  `reprobot reduce --jobs N` (local slots, warm where the script allows);
* ``ray-1``:  `reprobot reduce --cluster ADDR`, a local Ray cluster of one node of N CPUs;
* ``ray-2``:  the same on two local Ray nodes of N/2 CPUs each (ray.cluster_utils.Cluster).

Each is the whole command (confirmation, trace, search, cold verdict; --no-env), and the table
gives its wall, the search's runs and runs per minute of search, and the result's statements
(they must agree). Then the overhead Ray adds per candidate: the same candidate run
``--overhead-runs`` times one after another through a RayRunner slot and through the local
Runner, cold and warm; Ray's cost is the difference of the medians of each call's time outside
the candidate's own process (the actor call, the Outcome coming back), so the candidate's run
time and the load's swings in it cancel out. ``--engines ray-1 --overhead-only`` measures only that. Ray's own start (cluster, actors, zygotes) is reported
apart: it is paid once per reduction.

The cluster runs on this machine, so Ray's figures are its overhead with no network; a real
cluster adds the network's round trip per candidate.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_SCRIPTS = [ROOT / "bench" / "corpus" / "constants_dead_code.py",
                   ROOT / "examples" / "cpu_gemma4_lora" / "quick_lora.py"]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def reduce_once(script: Path, work: Path, label: str, cluster: str | None, slots: int, max_time: float,
                trace: bool = True) -> dict:
    """One whole `reprobot reduce` of a copy of the script's folder; its figures."""
    folder = work / label / script.parent.name
    shutil.copytree(script.parent, folder, ignore=shutil.ignore_patterns("repros", "__pycache__"))
    cmd = [sys.executable, "-m", "bot", "reduce", script.name, "--no-env", "--out", "repros",
           "--max-time", str(max_time)] + ([] if trace else ["--no-trace"])
    cmd += ["--cluster", cluster, "--cluster-slots", str(slots)] if cluster else ["--jobs", str(slots)]
    load = _load()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    wall = time.monotonic() - t0
    found = list((folder / "repros").glob("*/reduction.json"))
    row = {"script": script.name, "engine": label, "exit": proc.returncode, "command_wall_s": round(wall, 1),
           "load_before": load}
    if not found:
        row["error"] = (proc.stderr or proc.stdout)[-400:]
        return row
    red = json.loads(found[0].read_text(encoding="utf-8"))
    search_wall = red.get("wall_time") or 0.0
    runs = red.get("runs") or 0
    row.update({"status": red.get("status"), "statements": f"{red.get('statements_before')} -> {red.get('statements_after')}",
                "search_wall_s": search_wall, "runs": runs,
                "runs_per_min": round(60 * runs / search_wall, 1) if search_wall else None,
                "warm": (red.get("warm") or {}).get("enabled"),
                "repro_sha": _digest(found[0].parent / "repro.py")})
    if red.get("cluster"):
        c = red["cluster"]
        row.update({"ray_start_s": c.get("start_seconds"), "ray_runs": c.get("runs"), "ray_cancels": c.get("cancels"),
                    "ray_nodes": len(c.get("nodes") or {}), "ray_fallback": c.get("fallback")})
    return row


def _digest(path: Path) -> str | None:
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.is_file() else None


def overhead(script: Path, runs: int) -> dict:
    """Mean wall of one candidate through a Ray slot and through the local Runner, cold and warm
    (Ray must already be initialised)."""
    from reducer.cluster.ray_runner import RayRunner
    from reducer.run.runner import Runner, RunSpec
    from reducer.run.zygote import ZygotePool, warm_imports
    source = script.read_text(encoding="utf-8")
    modules = warm_imports(source, script.parent)
    local = Runner(RunSpec(script=script))
    out: dict = {"script": script.name, "runs_each": runs, "load_before": _load()}
    remote = RayRunner(local, slots=1, warm_modules=modules, notify=lambda line: None)
    out["ray_slot_start_s"] = remote.stats.start_seconds
    try:
        for warm in (False, True):
            if warm and modules:
                local.zygotes = ZygotePool(local.python, modules, local.base_environment())
                local.zygotes.release(local.zygotes.start_one())
            elif warm:
                continue
            tag = "warm" if warm else "cold"
            for name, runner in (("local", local), ("ray", remote)):
                runner.run(source, timeout=300, warm=warm)        # first run: caches, zygote's first fork
                walls, outside = [], []
                for _ in range(runs):
                    t0 = time.monotonic()
                    o = runner.run(source, timeout=300, warm=warm)
                    walls.append(time.monotonic() - t0)
                    # the call's time outside the candidate's own process: scratch copy, start,
                    # reading the output, and for Ray the actor call and the Outcome's way back
                    outside.append(walls[-1] - o.wall_time)
                out[f"{name}_{tag}_median_s"] = round(statistics.median(walls), 4)
                out[f"{name}_{tag}_outside_ms"] = round(1000 * statistics.median(outside), 1)
            # medians of the time outside the process: the candidate's own run time (and the load's
            # swings in it) cancels out
            out[f"overhead_{tag}_ms"] = round(out[f"ray_{tag}_outside_ms"] - out[f"local_{tag}_outside_ms"], 1)
    finally:
        remote.close()
        if local.zygotes is not None:
            local.zygotes.stop()
    out["load_after"] = _load()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scripts", nargs="*", type=Path, default=DEFAULT_SCRIPTS)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--max-time", type=float, default=900.0)
    ap.add_argument("--overhead-runs", type=int, default=15)
    ap.add_argument("--engines", default="local,ray-1,ray-2")
    ap.add_argument("--no-trace", action="store_true",
                    help="reduce without the trace-guided first cut: a longer search, so more runs to time")
    ap.add_argument("--overhead-only", action="store_true", help="only the per-candidate overhead (one Ray node)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    from reducer.cluster.ray_runner import job_runtime_env
    engines = [e for e in args.engines.split(",") if e]
    work = Path(tempfile.mkdtemp(prefix="reprobot-ray-bench-"))
    rows: list[dict] = []
    overheads: list[dict] = []
    os.environ["PYTHONPATH"] = str(ROOT)            # the nodes' workers import reducer from here
    for script in [s.resolve() for s in args.scripts]:
        for engine in engines:
            if engine == "local" and not args.overhead_only:
                rows.append(reduce_once(script, work, engine, None, args.slots, args.max_time, not args.no_trace))
                print(json.dumps(rows[-1]), flush=True)
                continue
            nodes = int(engine.split("-")[1])
            t0 = time.monotonic()
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
            for _ in range(nodes):
                cluster.add_node(num_cpus=max(1, args.slots // nodes))
            cluster.wait_for_nodes()
            started = round(time.monotonic() - t0, 1)
            try:
                if not args.overhead_only:
                    row = reduce_once(script, work, engine, cluster.address, args.slots, args.max_time, not args.no_trace)
                    row["cluster_up_s"] = started
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                if nodes == 1:       # the per-candidate overhead, on the one-node cluster
                    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False,
                             runtime_env=job_runtime_env())
                    try:
                        overheads.append(overhead(script, args.overhead_runs))
                        print(json.dumps(overheads[-1]), flush=True)
                    finally:
                        ray.shutdown()
            finally:
                cluster.shutdown()
    print()
    print(f"{'script':<24} {'engine':<7} {'exit':>4} {'wall s':>7} {'search s':>8} {'runs':>5} {'runs/min':>8} "
          f"{'statements':<12} {'repro':<12} {'ray start s':>11} load")
    for r in rows:
        print(f"{r['script']:<24} {r['engine']:<7} {r['exit']:>4} {r['command_wall_s']:>7} {r.get('search_wall_s', ''):>8} "
              f"{r.get('runs', ''):>5} {str(r.get('runs_per_min', '')):>8} {r.get('statements', r.get('error', ''))[:12]:<12} "
              f"{str(r.get('repro_sha')):<12} {str(r.get('ray_start_s', '')):>11} {r['load_before']}")
    for o in overheads:
        print(f"overhead per candidate, {o['script']} ({o['runs_each']} runs each, load {o['load_before']} -> "
              f"{o['load_after']}): cold {o.get('overhead_cold_ms')} ms (median call local {o.get('local_cold_median_s')} s, "
              f"ray {o.get('ray_cold_median_s')} s), warm {o.get('overhead_warm_ms')} ms (local "
              f"{o.get('local_warm_median_s')} s, ray {o.get('ray_warm_median_s')} s); a slot starts in "
              f"{o['ray_slot_start_s']} s")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "overhead": overheads}, indent=2), encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
