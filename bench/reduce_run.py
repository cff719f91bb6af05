"""One `reprobot reduce ... --json` run as the benches make it: in a scratch folder, with a given
checkout's code on PYTHONPATH, timed, with the machine's load before and after."""
from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ReduceRun:
    proc: subprocess.CompletedProcess
    out: dict                 # reduce's --json summary ({} when it printed none)
    wall_s: float
    load_before: float
    load_after: float

    def repro_text(self, work: Path) -> str:
        """repro.py's text; reduce prints its paths as it was given --out, relative to its cwd."""
        path = work / self.out["repro"] if self.out.get("repro") else None
        return path.read_text() if path is not None and path.is_file() else ""

    def row(self) -> dict:
        return {"exit": self.proc.returncode, "status": self.out.get("status"),
                "before": self.out.get("statements_before"), "after": self.out.get("statements_after"),
                "runs": self.out.get("runs"), "wall_s": round(self.wall_s, 1),
                "load_before": round(self.load_before, 2), "load_after": round(self.load_after, 2),
                "stderr_tail": self.proc.stderr[-1500:] if self.proc.returncode else ""}


def run_reduce(cmd: list[str], work: Path, code_root: Path) -> ReduceRun:
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=work, env=dict(os.environ, PYTHONPATH=str(code_root)),
                          capture_output=True, text=True)
    wall = time.monotonic() - t0
    try:
        out = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        out = {}
    return ReduceRun(proc, out, wall, load0, os.getloadavg()[0])
