"""Warm starts against cold runs, side by side in one process on one machine.

For each script: per-candidate overhead (mean run time minus the script's own time, measured
inside the script with time.perf_counter from the end of its leading imports to its exit), runs
per minute, and the whole reduction's wall time, warm and --cold.

A run's time is the whole ``Runner.run`` call as the search pays it: the scratch copy, the fork
or exec, the run, the wait for its streams, the parsing of its tracebacks and the scratch's
removal (``Outcome.wall_time`` leaves the first and the last two out). Its own time is read from
that same run's stderr, so each overhead is one run's wall minus that run's own work.

    python bench/warm_vs_cold.py [--runs 5] [--max-time 900] [--skip-reduce-example] [--child-only]

The child case (a failure in a spawn child that imports the stack and builds a tiny model) gives
warm, warm-parent-cold-child and cold mean run times, each with the child included, and the
overhead as a share of the child's own work (goal: at most 25% warm).

Prints a markdown table. Timings on a 2-core machine are noisy: compare the ratios of one run.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reducer.run.runner import Runner, RunSpec  # noqa: E402
from reducer.run.zygote import ZygotePool, warm_imports  # noqa: E402

EXAMPLE = ROOT / "examples" / "cpu_gemma4_lora" / "train_lora.py"
CORPUS = ROOT / "bench" / "corpus"
# Inserted after the script's leading imports: how long the script itself ran after them (the
# part no warm start can save), reported on stderr at exit.
_CLOCK = (
    "import time as _rb_time\n_rb_t0 = _rb_time.perf_counter()\n"
    "import atexit as _rb_atexit, sys as _rb_sys\n"
    "_rb_atexit.register(lambda: _rb_sys.stderr.write("
    "'REPROBOT_SELF %.4f\\n' % (_rb_time.perf_counter() - _rb_t0)))\n")


def _self_time(stderr: str) -> float | None:
    for line in stderr.splitlines():
        if line.startswith("REPROBOT_SELF "):
            return float(line.split()[1])
    return None


def with_clock(source: str) -> str:
    import ast
    tree = ast.parse(source)
    end = 0
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            end = node.end_lineno
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            end = node.end_lineno
        else:
            break
    lines = source.splitlines(keepends=True)
    return "".join(lines[:end]) + _CLOCK + "".join(lines[end:])


def timed_run(runner: Runner, source: str, **kw):
    """(outcome, seconds of the whole call)."""
    t0 = time.monotonic()
    o = runner.run(source, **kw)
    return o, time.monotonic() - t0


def per_candidate(script: Path, args: list[str], runs: int) -> dict:
    source = with_clock(script.read_text())
    runner = Runner(RunSpec(script=script, args=tuple(args), timeout=600))
    runner.zygotes = ZygotePool(runner.python, warm_imports(script.read_text(), runner.script_dir),
                                runner.base_environment())
    out: dict = {}
    try:
        t0 = time.monotonic()
        runner.zygotes.release(runner.zygotes.start_one())
        out["zygote_start"] = time.monotonic() - t0
        for mode in ("warm", "cold"):
            walls, selfs = [], []
            for _ in range(runs):
                o, wall = timed_run(runner, source, warm=(mode == "warm"))
                walls.append(wall)
                selfs.append(_self_time(o.stderr) or 0.0)
            out[mode] = {"mean_run": statistics.mean(walls), "self": statistics.mean(selfs),
                         "overhead": statistics.mean(w - s for w, s in zip(walls, selfs)),
                         "runs_per_min": 60.0 / statistics.mean(walls)}
    finally:
        runner.zygotes.stop()
    return out


# A failure in a spawn child: the child imports torch + transformers (the script's leading imports,
# run again as __mp_main__), builds a tiny model from a config on CPU, runs it, then raises. The
# child reports its own work (from its target's first line to the raise) on stderr.
CHILD_CASE = '''import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM
import multiprocessing as mp
import sys
import time


def child():
    t0 = time.perf_counter()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(cfg)
    out = model(torch.randint(0, 512, (2, 16)), labels=torch.randint(0, 512, (2, 16)))
    out.loss.backward()
    sys.stderr.write("REPROBOT_CHILD_SELF %.4f\\n" % (time.perf_counter() - t0))
    sys.stderr.flush()
    raise ValueError("loss %d is too high" % int(out.loss.item() > 0))


if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=child)
    p.start()
    p.join()
    sys.exit(p.exitcode)
'''


# The same work done by the parent itself, no child: what a warm candidate costs without one.
INLINE_CASE = CHILD_CASE.split('if __name__ == "__main__":')[0] + 'if __name__ == "__main__":\n    child()\n'


def _child_self(stderr: str) -> float | None:
    for line in stderr.splitlines():
        if line.startswith("REPROBOT_CHILD_SELF "):
            return float(line.split()[1])
    return None


def child_case(runs: int) -> dict:
    """Per-candidate figures of CHILD_CASE: warm (parent and child from the zygote), warm parent
    with a cold child (REPROBOT_WARM_CHILDREN=0, how it was before), and cold. Overhead is a run's
    whole time (``timed_run``) minus the child's own work in that run: from its target's first
    line to its raise, measured in the child, after the child's imports (its re-import of the
    script as ``__mp_main__``). A warm run whose child did not start warm is an error, and so is
    a "cold child" run whose child did."""
    d = Path(tempfile.mkdtemp(prefix="reprobot-bench-child-"))
    script = d / "spawn_child_model.py"
    script.write_text(CHILD_CASE)
    runner = Runner(RunSpec(script=script, timeout=600))
    runner.zygotes = ZygotePool(runner.python, warm_imports(CHILD_CASE, runner.script_dir), runner.base_environment())
    out: dict = {}
    try:
        runner.zygotes.release(runner.zygotes.start_one())
        modes = {"warm": (True, None, CHILD_CASE),
                 "warm, cold child": (True, {"REPROBOT_WARM_CHILDREN": "0"}, CHILD_CASE),
                 "cold": (False, None, CHILD_CASE),
                 "warm, no child (the work in the parent)": (True, None, INLINE_CASE)}
        # warm children counted per run: one in a warm run, none with REPROBOT_WARM_CHILDREN=0
        expect = {"warm": 1, "warm, cold child": 0}
        for _ in range(runs):   # interleaved, so that load from elsewhere hits every mode alike
            for mode, (warm, env, source) in modes.items():
                before = runner.zygotes.children()
                o, wall = timed_run(runner, source, warm=warm, extra_env=env)
                own = _child_self(o.stderr)
                if own is None or "ValueError: loss" not in o.stderr:
                    raise RuntimeError(f"child case did not fail as expected ({mode}): {o.stderr[-500:]}")
                warm_children = runner.zygotes.children()["warm"] - before["warm"]
                if mode in expect and warm_children != expect[mode]:
                    raise RuntimeError(f"{mode}: {warm_children} warm children: {runner.zygotes.children()}")
                out.setdefault(mode, []).append((wall, own))
        out["children"] = runner.zygotes.children()
    finally:
        runner.zygotes.stop()
        shutil.rmtree(d, ignore_errors=True)
    return out


def print_child_case(runs: int) -> None:
    res = child_case(runs)
    print("\n| child case (spawn child: torch + transformers, tiny Llama on CPU, raises) | mean run s "
          "(incl. child) | child's own work s | overhead s | overhead / child's own work | "
          "median of the runs' ratios |")
    print("|---|---|---|---|---|---|")
    for mode in ("warm", "warm, cold child", "cold", "warm, no child (the work in the parent)"):
        walls = [w for w, _ in res[mode]]
        owns = [o for _, o in res[mode]]
        over = statistics.mean(w - o for w, o in res[mode])
        median = statistics.median((w - o) / max(o, 1e-6) for w, o in res[mode])
        print(f"| {mode} | {statistics.mean(walls):.3f} | {statistics.mean(owns):.3f} | {over:.3f} | "
              f"{100 * over / max(statistics.mean(owns), 1e-6):.0f}% | {100 * median:.0f}% |", flush=True)
    print(f"children of the warm runs: {res['children']}")


def reduction(script: Path, args: list[str], warm: bool, max_time: float, jobs: int) -> dict:
    out_dir = Path(tempfile.mkdtemp(prefix="reprobot-bench-wc-"))
    cmd = [sys.executable, "-m", "bot", "reduce", str(script), "--out", str(out_dir), "--no-env",
           "--jobs", str(jobs), "--max-time", str(max_time)] + ([] if warm else ["--cold"])
    if args:
        cmd += ["--", *args]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.monotonic() - t0
    folders = list(out_dir.glob("*/reduction.json"))
    data = json.loads(folders[0].read_text()) if folders else {}
    return {"wall": wall, "rc": proc.returncode, "status": data.get("status"), "runs": data.get("runs"),
            "statements": data.get("statements_after"), "slot_utilisation": data.get("slot_utilisation")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5, help="runs per mode for the per-candidate figures")
    ap.add_argument("--max-time", type=float, default=900.0, help="bound on each whole reduction")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--skip-reduce-example", action="store_true",
                    help="per-candidate figures only for the CPU example (its reductions take minutes)")
    ap.add_argument("--child-only", action="store_true", help="only the spawn-child case")
    args = ap.parse_args()
    if args.child_only:
        print(f"load before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
        print_child_case(args.runs)
        print(f"load after: {os.getloadavg()[0]:.2f}")
        return 0
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())["scripts"]
    scripts = [(EXAMPLE, [])] + [(CORPUS / e["file"], e["args"]) for e in manifest]
    print(f"load before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; --jobs {args.jobs}", flush=True)
    print("| script | zygote start s | run warm s | run cold s | overhead warm s | overhead cold s | "
          "overhead ratio | runs/min warm | runs/min cold | reduce warm s (runs, stmts, status) | "
          "reduce cold s (runs, stmts, status) | reduce speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for script, sargs in scripts:
        pc = per_candidate(script, sargs, args.runs)
        w, c = pc["warm"], pc["cold"]
        ratio = c["overhead"] / max(w["overhead"], 1e-3)
        if script == EXAMPLE and args.skip_reduce_example:
            rw = rc = None
        else:
            rw = reduction(script, sargs, True, args.max_time, args.jobs)
            rc = reduction(script, sargs, False, args.max_time, args.jobs)

        def cell(r):
            return "-" if r is None else f"{r['wall']:.1f} ({r['runs']}, {r['statements']}, {r['status']})"
        speed = "-" if rw is None else f"{rc['wall'] / max(rw['wall'], 1e-3):.2f}x"
        print(f"| {script.name} | {pc['zygote_start']:.2f} | {w['mean_run']:.3f} | {c['mean_run']:.3f} | "
              f"{w['overhead']:.3f} | {c['overhead']:.3f} | {ratio:.1f}x | {w['runs_per_min']:.0f} | "
              f"{c['runs_per_min']:.0f} | {cell(rw)} | {cell(rc)} | {speed} |", flush=True)
    print_child_case(args.runs)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
