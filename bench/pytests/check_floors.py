"""The pytest corpus (issue #43): each case's test fails under pytest, and its hand floor
(`floor.py`) fails alone with the same exception type and message; MANIFEST.json gets the
floor's statement count and the failure.

    python bench/pytests/check_floors.py [--only NAME,...]

Run with reprobot's interpreter (the corpus needs torch, transformers, peft, accelerate); no
download (tiny models from configs). pytest runs in the case's folder (its own pytest.ini makes
it the rootdir) with `--tb=native`, and the traceback is read with reprobot's own parser
(reducer/failure/tracebacks.py); the floor runs in a fresh empty folder with the Hub offline.
Exit 1 when a floor does not match its test's failure.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
       "PYTHONDONTWRITEBYTECODE": "1"}


def cases() -> list[Path]:
    return sorted(p.parent for p in HERE.glob("**/MANIFEST.json"))


def last_failure(text: str) -> tuple[str, str] | None:
    from reducer.failure.normalize import normalize_message
    from reducer.failure.tracebacks import parse_tracebacks
    records = parse_tracebacks(text)
    if not records:
        return None
    r = records[-1]
    return r.exc_type, normalize_message(r.message)


def check(case: Path) -> dict:
    from reducer.analysis.size import count_statements
    manifest = json.loads((case / "MANIFEST.json").read_text())
    test = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--tb=native", "-q",
                           manifest["node"]], cwd=case, capture_output=True, text=True, env=ENV, timeout=900)
    test_failure = last_failure(test.stdout)
    floor = (case / "floor.py").read_text()
    with tempfile.TemporaryDirectory() as empty:
        run = subprocess.run([sys.executable, str(case / "floor.py")], cwd=empty, capture_output=True, text=True,
                             env=ENV, timeout=900)
    floor_failure = last_failure(run.stderr)
    manifest["floor_statements"] = count_statements(floor)
    manifest["failure"] = {"exc_type": test_failure[0], "message": test_failure[1]} if test_failure else None
    (case / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return {"case": case.relative_to(HERE).as_posix(), "test_fails": test.returncode == 1 and test_failure is not None,
            "floor_same": test_failure is not None and test_failure == floor_failure,
            "test": test_failure, "floor": floor_failure, "floor_statements": manifest["floor_statements"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="")
    args = p.parse_args(argv)
    only = {s for s in args.only.split(",") if s}
    bad = 0
    for case in cases():
        if only and case.name not in only:
            continue
        row = check(case)
        bad += not (row["test_fails"] and row["floor_same"])
        print(json.dumps(row), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
