"""What a deterministic failure costs under #32's rule against the old one, both measured in one run.

The old rule is main's code (--runs 2 confirmation runs, a run that passes refused as flaky); the
new one is this checkout's (the same two runs while both fail; a rate measured only when one does
not). The same script is reduced by both, with --cold (every run a fresh interpreter) and warm.
Cold, each run of the script is counted by a sitecustomize on PYTHONPATH (it counts only inside
reprobot's runs, where REPROBOT_EXCEPTIONS is set), so "runs" is how many times the script really
ran: confirmation, traced runs, candidates, final verification, the alone check. Warm runs are
forked from one interpreter and are not counted that way; reduction.json's counts are given for both.

    python bench/flaky.py [--old /work/main] [--repeat 1]
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

HERE = Path(__file__).resolve().parent.parent

COUNTER = '''\
import os

if os.environ.get("REPROBOT_EXCEPTIONS") and os.environ.get("BENCH_COUNTER"):
    fd = os.open(os.environ["BENCH_COUNTER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, b".")
    os.close(fd)
'''

SCRIPT = '''\
import json


def noise(k):
    total = 0
    for i in range(k):
        total += i
    return total


config = {"layers": 4, "width": 16, "name": "bench"}
print(noise(10), json.dumps(config))
sizes = [config["width"] * (i + 1) for i in range(config["layers"])]
if sizes[-1] > 32:
    raise ValueError(f"width {sizes[-1]} too large for {config['name']}")
print("done")
'''


def one(code: Path, work: Path, cold: bool) -> dict:
    work.mkdir(parents=True)
    (work / "lib").mkdir()
    (work / "lib" / "sitecustomize.py").write_text(COUNTER)
    (work / "det.py").write_text(SCRIPT)
    counter = work / "count"
    env = {**os.environ, "COLUMNS": "200", "BENCH_COUNTER": str(counter),
           "PYTHONPATH": f"{code}{os.pathsep}{work / 'lib'}"}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", "det.py", "--out", "s", "--no-env",
                           *(["--cold"] if cold else [])],
                          cwd=work, env=env, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{code}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    [d] = [p for p in (work / "s").iterdir() if p.is_dir()]
    red = json.loads((d / "reduction.json").read_text())
    sig = json.loads((d / "signature.json").read_text())
    return {"runs": len(counter.read_text()) if cold else None, "wall_s": round(wall, 2),
            "confirmation_runs": (sig.get("rate") or {}).get("runs", len(sig.get("runs") or [])),
            "verdicts": red.get("runs"), "oracle_runs": red.get("oracle_runs"),
            "statements_after": red.get("statements_after"), "repro": (d / "repro.py").read_text()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, default=Path("/work/main"), help="a checkout with the old rule")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-flaky-") as tmp:
        for i in range(args.repeat):
            for cold in (True, False):
                for name, code in (("old rule", args.old.resolve()), ("new rule", HERE)):
                    r = one(code, Path(tmp) / f"{name.split()[0]}-{'cold' if cold else 'warm'}-{i}", cold)
                    rows.append((name, cold, r))
                    print(f"{name:9} {'cold' if cold else 'warm'}  runs {r['runs'] if cold else '-':>3}  "
                          f"wall {r['wall_s']:6.2f}s  confirmation {r['confirmation_runs']}  verdicts {r['verdicts']}  "
                          f"oracle runs {r['oracle_runs']}  statements {r['statements_after']}")
    for cold in (True, False):
        old = [r for n, c, r in rows if n == "old rule" and c == cold]
        new = [r for n, c, r in rows if n == "new rule" and c == cold]
        same = all(a["repro"] == b["repro"] for a, b in zip(old, new))
        runs = (f"runs old {sum(r['runs'] for r in old)} vs new {sum(r['runs'] for r in new)}; " if cold else "")
        print(f"{'cold' if cold else 'warm'}: same repro: {same}; {runs}"
              f"wall old {sum(r['wall_s'] for r in old):.2f}s vs new {sum(r['wall_s'] for r in new):.2f}s")


if __name__ == "__main__":
    main()
