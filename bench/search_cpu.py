"""reprobot's own CPU per candidate on a real ML script: the search over the GPU example worker
(examples/gpu_gemma4_bnb/inference_worker.py, 192 statements) with the values its H100 run
recorded, every candidate refused, one slot. Nothing runs: what is measured is the passes, the
gate and the rendering that each candidate costs before a slot can take it.

    python bench/search_cpu.py [--script PATH --trace PATH] [--profile N]

Every candidate refused keeps the script at its full size, so this is the most the search can
cost per candidate on it; it is not the accepted path of a real reduction.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reducer.analysis.trace import TraceData  # noqa: E402
from reducer.search.driver import Reducer  # noqa: E402

EXAMPLE = ROOT / "examples" / "gpu_gemma4_bnb"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--script", type=Path, default=EXAMPLE / "inference_worker.py")
    ap.add_argument("--trace", type=Path, default=EXAMPLE / "results" / "one-command" / "trace.json")
    ap.add_argument("--profile", type=int, default=0, help="print the N costliest functions of reducer/")
    args = ap.parse_args(argv)
    source = args.script.read_text(encoding="utf-8")
    trace = TraceData.load(source, args.trace)
    reducer = Reducer(source, lambda _s: False, jobs=1, trace=trace,
                      failure_message="Tensor.item() cannot be called on meta tensors")
    prof = cProfile.Profile() if args.profile else None
    cpu0, wall0 = time.process_time(), time.monotonic()
    if prof:
        prof.enable()
    result = reducer.run()
    if prof:
        prof.disable()
    cpu = time.process_time() - cpu0
    stats = result.stats
    print(f"{args.script.name}: {stats.statements_before} statements, {stats.proposed} candidates proposed, "
          f"{stats.runs} run (all refused); reprobot CPU {cpu:.1f} s, {cpu / max(stats.runs, 1):.3f} s per run, "
          f"{cpu / max(stats.proposed, 1):.3f} s per proposed; wall {time.monotonic() - wall0:.1f} s")
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats("reducer/", args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
