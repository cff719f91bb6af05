"""What the corpus benchmarks (bench/mlfloor.py, bench/notebooks/measure.py,
bench/pytests/measure.py) share: one `reprobot reduce ... --json --quiet` run of a corpus entry,
and the row's verdict against its hand floor."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

GOAL = 1.5          # a repro meets the goal at most this many times its floor's statements

ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def reprobot() -> list[str]:
    exe = Path(sys.executable).with_name("reprobot")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "bot"]


def reduce_json(args: list[str], cwd: Path, timeout: float, preexec_fn=None) -> tuple[subprocess.CompletedProcess, dict, float]:
    """``reprobot reduce --json --quiet ARGS`` in ``cwd``: the process, its summary (or a status
    saying why there is none) and the wall time. The options go first: ARGS may end with
    ``-- LAUNCH LINE``, after which everything is the script's (f060209 put them last, and every
    launch-line script got ``--json --quiet`` as its own arguments)."""
    t0 = time.monotonic()
    proc = subprocess.run(reprobot() + ["reduce", "--json", "--quiet", *args], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, **ENV}, timeout=timeout, preexec_fn=preexec_fn)
    wall = time.monotonic() - t0
    try:
        result = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        result = {"status": f"error (exit {proc.returncode})", "error": proc.stderr.strip()[-400:]}
    return proc, result, wall


def judged(row: dict, floor: int, returncode: int) -> dict:
    """The row's ratio to the floor and whether it meets the goal (done, or stopped at the limit
    with its best kept)."""
    s = row.get("statements")
    row["ratio"] = round(s / floor, 2) if s else None
    row["goal_met"] = bool(s) and s <= GOAL * floor and returncode in (0, 14)
    return row


def folder_fields(folder: Path, floor_src: str, original: Path, record_name: str) -> tuple[dict, dict]:
    """What a reduced folder says for a row (verified, whether the floor fails with its signature,
    repro.py's text) and the input's own record (``notebook.json``, ``pytest.json``; {} if none)."""
    from bench.interesting import is_interesting
    reduction, record = folder / "reduction.json", folder / record_name
    fields = {"verified": json.loads(reduction.read_text()).get("verified") if reduction.is_file() else None,
              "floor_same_signature": is_interesting(floor_src, folder / "signature.json", original,
                                                     sys.executable, 300.0)}
    if (folder / "repro.py").is_file():
        fields["repro"] = (folder / "repro.py").read_text(encoding="utf-8")
    return fields, json.loads(record.read_text()) if record.is_file() else {}
