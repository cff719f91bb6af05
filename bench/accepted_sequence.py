"""The search's behaviour, recorded: for every corpus script, the sequence of accepted candidates
(sha1 of each) and the final text, under a deterministic oracle that runs nothing.

    python bench/accepted_sequence.py --record bench/accepted_sequence.json   # write the figures
    python bench/accepted_sequence.py --check bench/accepted_sequence.json    # compare, exit 1 on a change
    python bench/accepted_sequence.py --check FILE --scripts main_guard,map_filter

A refactoring of the search (the gate, the scheduler, the loop) or of the passes' toolkit must
leave these identical. The oracle is a hash coin over the candidate's text that also requires the
original's imported module names to stay: deterministic, so the accepted sequence is fixed, and
accepting about three candidates in four, so every pass's acceptance path runs. Each script is
reduced three ways: one slot; two slots; two slots with runs taken as slow, which turns on the
speculation (the next pass's first candidates, find_integer's next probes, stale runs cancelled).
The accepted sequence is the same in all three (the search reads verdicts in proposal order); the
number of runs is recorded for one slot only (with two, it depends on which runs finish first).
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reducer.analysis.trace import TraceData  # noqa: E402
from reducer.search.driver import Reducer  # noqa: E402

CORPUS = ROOT / "bench" / "corpus"
MODES = ("jobs1", "jobs2", "jobs2_slow")


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def imported_modules(source: str) -> list[str]:
    """Top-level module names the script imports: the oracle requires each to stay."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return sorted(names)


def oracle_for(source: str):
    keep = imported_modules(source)

    def interesting(candidate: str) -> bool:
        return all(k in candidate for k in keep) and hashlib.sha1(candidate.encode()).digest()[0] % 4 != 0

    return interesting


def _as_if_slow(reducer: Any) -> None:
    """Mean run time far above the speculation threshold, as tests/test_search.py does."""
    scheduler = getattr(reducer, "scheduler", None)
    if scheduler is not None:
        scheduler.run_time.seconds, scheduler.run_time.count = 100.0, 1
    else:
        reducer._run_time = [100.0, 1]


def reduce_one(source: str, mode: str) -> dict[str, Any]:
    accepted: list[str] = []
    reducer = Reducer(source, oracle_for(source), jobs=1 if mode == "jobs1" else 2,
                      trace=TraceData(source, lines=set(range(1, source.count("\n") + 2))),
                      on_accept=lambda best, _stats: accepted.append(_sha(best)))
    if mode == "jobs2_slow":
        _as_if_slow(reducer)
    result = reducer.run()
    out: dict[str, Any] = {"status": result.stats.status, "accepted": accepted,
                           "final_sha1": _sha(result.best_source), "final": result.best_source,
                           "pass_errors": {k: v.errors for k, v in result.stats.passes.items() if v.errors}}
    if mode == "jobs1":
        out.update(runs=result.stats.runs, proposed=result.stats.proposed, cache_hits=result.stats.cache_hits)
    return out


def record(scripts: list[Path], modes: tuple[str, ...]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for path in scripts:
        source = path.read_text(encoding="utf-8")
        figures[path.name] = {}
        for mode in modes:
            t0 = time.monotonic()
            figures[path.name][mode] = reduce_one(source, mode)
            got = figures[path.name][mode]
            print(f"{path.name:32s} {mode:10s} {len(got['accepted']):3d} accepted "
                  f"{got['final_sha1'][:12]} {time.monotonic() - t0:6.1f}s", flush=True)
    return figures


def compare(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    problems = []
    for name, modes in got.items():
        for mode, figures in modes.items():
            want = expected.get(name, {}).get(mode)
            if want is None:
                problems.append(f"{name} {mode}: not in the recording")
                continue
            for key in figures:
                if figures[key] != want.get(key):
                    problems.append(f"{name} {mode}: {key} differs")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--record", type=Path, help="write the figures to this JSON file")
    group.add_argument("--check", type=Path, help="compare with the figures in this JSON file")
    ap.add_argument("--scripts", default="", help="comma-separated corpus file names (default: all)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {','.join(MODES)}")
    args = ap.parse_args(argv)
    names = [n if n.endswith(".py") else f"{n}.py" for n in args.scripts.split(",") if n]
    scripts = [CORPUS / n for n in names] if names else sorted(CORPUS.glob("*.py"))
    missing = [str(p.name) for p in scripts if not p.is_file()]
    if missing:
        print(f"error: not in bench/corpus: {', '.join(missing)}", file=sys.stderr)
        return 2
    modes = tuple(m for m in args.modes.split(",") if m)
    if not set(modes) <= set(MODES):
        print(f"error: unknown mode in {args.modes!r}; known: {', '.join(MODES)}", file=sys.stderr)
        return 2
    got = record(scripts, modes)
    if args.record:
        args.record.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return 0
    problems = compare(json.loads(args.check.read_text(encoding="utf-8")), got)
    for p in problems:
        print(p)
    print("identical" if not problems else f"{len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
