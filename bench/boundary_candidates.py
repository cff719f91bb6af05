"""What the boundary call sees of a script: the records the launcher writes (the failing call's
values, what the library function received, recipes) and the candidates the prelude would offer.

    python bench/boundary_candidates.py SCRIPT [--exc-type T] [--bring-home] [--python PY] [--json OUT]

``--bring-home`` first applies the bring_home pass's first candidate (a child's target called in
the parent), as the search does before the boundary call. The script runs once, in a scratch copy
of its folder, with reprobot's exception recorder on PYTHONPATH, as a candidate run does."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.targets.registry import recipe_files  # noqa: E402
from reducer.analysis.boundary import ENV_VAR, LAUNCHER, load, matching, peer_calls  # noqa: E402
from reducer.analysis.recipes import recipe_env  # noqa: E402
from reducer.passes.boundary import candidates  # noqa: E402
from reducer.run.raised import HOOK_DIR  # noqa: E402


def brought_home(source: str) -> str:
    from reducer.analysis.cst import parse
    from reducer.passes.direct import _children, _homes
    module = parse(source)
    for child in _children(module):
        for candidate in _homes(module, child):
            return candidate
    return source


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("script", type=Path)
    p.add_argument("--exc-type", default="")
    p.add_argument("--bring-home", action="store_true")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--json", type=Path)
    p.add_argument("--run", action="store_true", help="run each candidate alone too and show how it ends")
    a = p.parse_args(argv)
    source = a.script.read_text(encoding="utf-8")
    if a.bring_home:
        source = brought_home(source)
    with tempfile.TemporaryDirectory(prefix="reprobot-boundary-probe-") as d:
        work = Path(d) / "work"
        shutil.copytree(a.script.resolve().parent, work, ignore=shutil.ignore_patterns("__pycache__", "tiny_gemma4"))
        (work / a.script.name).write_text(source, encoding="utf-8")
        launcher = Path(d) / "launcher.py"
        launcher.write_text(LAUNCHER, encoding="utf-8")
        out = Path(d) / "boundary.jsonl"
        env = {**os.environ, ENV_VAR: str(out), **recipe_env(recipe_files()), "TMPDIR": d,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOK_DIR), os.environ.get("PYTHONPATH", "")]))}
        proc = subprocess.run([a.python, str(launcher), a.script.name], cwd=work, env=env, capture_output=True,
                              text=True, timeout=a.timeout)
        records = load(out)
        watch = peer_calls(records)
        if watch:
            # a rank's failure: one more run records the same call as every rank entered it, as
            # reducer.analysis.boundary.boundary_run does
            out.unlink(missing_ok=True)
            subprocess.run([a.python, str(launcher), a.script.name], cwd=work, capture_output=True, text=True,
                           env={**env, "REPROBOT_BOUNDARY_AT": watch}, timeout=a.timeout)
            records += [b for b in load(out) if b.entry]
    print(f"run: rc={proc.returncode}; {len(records)} boundary record(s)")
    if not records:
        print(proc.stderr[-4000:])
    for r in records:
        print(json.dumps({"line": r.line, "func": r.func, "exc_type": r.exc_type, "child": r.child,
                          "message": r.message[:200], "values": sorted(r.values),
                          "recipes": {k: v["recipe"]["expr"][:300] for k, v in r.values.items() if "recipe" in v},
                          "callee": (r.callee or {}).get("name"), "rank": r.rank, "entry": r.entry,
                          "start": bool((r.state or {}).get("start"))}, indent=1))
    found = candidates(source, matching(records, a.exc_type, ""), lambda e, v: True)
    for i, c in enumerate(found):
        print(f"----- candidate {i}\n{c}")
    if a.json:
        a.json.write_text(json.dumps({"records": [r.__dict__ for r in records], "candidates": found}, indent=1))
    if a.run:
        import time
        for i, c in enumerate(found):
            with tempfile.TemporaryDirectory(prefix="reprobot-boundary-run-") as d:
                (Path(d) / "repro.py").write_text(c, encoding="utf-8")
                t0 = time.monotonic()
                proc = subprocess.run([a.python, "repro.py"], cwd=d, capture_output=True, text=True, timeout=a.timeout)
                last = (proc.stderr.strip().splitlines() or [""])[-1]
                print(f"candidate {i} alone: rc={proc.returncode} in {time.monotonic() - t0:.1f}s: {last[:300]}")
    return 0 if found else 1


if __name__ == "__main__":
    raise SystemExit(main())
