"""Run a repro the way a maintainer would: its `repro.py` copied alone into an empty folder, the Hub
offline, nothing else of the user's beside it; say whether it fails with the signature the repro
folder stores (issue #30's check for the examples, on CPU in the tests and on the GPU device).

    python bench/run_alone.py REPROS_OR_FOLDER [--python python3] [--timeout 300] [--json]

REPROS_OR_FOLDER is one repro folder (holding repro.py and signature.json) or a `repros/` folder,
whose newest repro is taken. Exit 0: same signature; 1: another failure or none; 2: bad input.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reducer.failure.signature import MatchOptions, Signature, find_match, signature_of  # noqa: E402
from reducer.failure.tracebacks import parse_tracebacks  # noqa: E402


@dataclass
class AloneRun:
    same: bool
    returncode: int | None          # None: killed at the timeout
    wall_s: float
    expected: str                   # the stored signature, one line
    got: str | None                 # the run's last failure, one line (None: no traceback)
    stderr_tail: str


def repro_folder(path: Path) -> Path:
    """The folder itself, or the newest repro folder under a `repros/` folder."""
    if (path / "repro.py").is_file():
        return path
    found = sorted((p for p in path.glob("*/repro.py")), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"no repro.py in {path} or its subfolders")
    return found[-1].parent


def run_alone(folder: Path, python: str = sys.executable, timeout: float = 300,
              workdir: Path | None = None) -> AloneRun:
    stored = json.loads((folder / "signature.json").read_text(encoding="utf-8"))
    target, options = Signature.from_dict(stored["signature"]), MatchOptions.from_dict(stored["options"])
    with tempfile.TemporaryDirectory(prefix="maintainer-", dir=workdir) as empty:
        Path(empty, "repro.py").write_text((folder / "repro.py").read_text(encoding="utf-8"), encoding="utf-8")
        # TMPDIR inside the empty folder: whatever the repro writes stays there and goes with it.
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "TMPDIR": empty}
        start = time.monotonic()
        try:
            proc = subprocess.run([python, "repro.py"], cwd=empty, env=env, capture_output=True, text=True,
                                  timeout=timeout)
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc = None
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        wall = time.monotonic() - start
    records = parse_tracebacks(err, "stderr") + parse_tracebacks(out, "stdout")
    hit = find_match(records, target, options)
    last = hit or (records[-1] if records else None)
    return AloneRun(same=rc not in (0, None) and hit is not None, returncode=rc, wall_s=round(wall, 1),
                    expected=target.one_line(),
                    got=signature_of(last, options).one_line() if last is not None else None,
                    stderr_tail="\n".join(err.splitlines()[-15:]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        folder = repro_folder(args.path)
        result = run_alone(folder, args.python, args.timeout)
    except (OSError, KeyError, ValueError) as exc:
        print(f"run_alone: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"folder": folder.name, **asdict(result)}, indent=1))
    else:
        verdict = "same signature" if result.same else "DIFFERENT"
        print(f"run_alone: {folder.name}: repro.py alone, offline: rc={result.returncode} in {result.wall_s} s: "
              f"{verdict}\n  expected: {result.expected}\n  got:      {result.got}")
        if not result.same:
            print(result.stderr_tail)
    return 0 if result.same else 1


if __name__ == "__main__":
    sys.exit(main())
