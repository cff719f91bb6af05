"""The interestingness test shared by every reducer in bench/compare.py.

    python bench/interesting.py --signature SIGNATURE_JSON --script ORIGINAL.py \
        [--python PY] [--timeout S] CANDIDATE.py|-

Exit 0 when the candidate (a file, or stdin for "-") fails with the target Signature stored in
SIGNATURE_JSON (written by `reprobot reduce --no-reduce`), 1 otherwise. It is reprobot's own
oracle, not an approximation of it: the same Runner (a scratch copy of the original script's
folder, the script's name and arguments, a per-run TMPDIR, the whole process group killed at the
timeout, the run stopped as soon as the target failure is on screen) and the same find_match.
So when pysource-minimize, Shrink Ray and reprobot are compared, they all answer the same
question.

A candidate that does not compile is rejected before anything runs: it is not a run of the
script, so it is not counted (bench/compare.py counts runs with a wrapper interpreter).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--signature", type=Path, required=True, help="signature.json of the target failure")
    p.add_argument("--script", type=Path, required=True, help="the original script (its folder and name are used)")
    p.add_argument("--python", default=sys.executable, help="interpreter that runs the candidate")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds one candidate may run")
    p.add_argument("candidate", help="candidate file, or - for stdin")
    return p.parse_args(argv)


def is_interesting(source: str, signature_json: Path, script: Path, python: str, timeout: float) -> bool:
    # Imported here so that a candidate rejected by compile() costs no import time.
    from reducer.failure.signature import MatchOptions, Signature, find_match
    from reducer.run.runner import Runner, RunSpec

    stored = json.loads(signature_json.read_text(encoding="utf-8"))
    target = Signature.from_dict(stored["signature"])
    options = MatchOptions.from_dict(stored.get("options", {}))
    runner = Runner(RunSpec(script=script, python=python, args=tuple(stored.get("args", [])),
                            timeout=timeout))

    def hit(records) -> bool:
        return find_match(records, target, options) is not None

    outcome = runner.run(source, timeout=timeout, stop_when=hit)
    return hit(outcome.tracebacks)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    raw = sys.stdin.buffer.read() if args.candidate == "-" else Path(args.candidate).read_bytes()
    try:
        source = raw.decode("utf-8")
        compile(source, str(args.script), "exec", dont_inherit=True)
    except (UnicodeDecodeError, SyntaxError, ValueError):
        return 1
    return 0 if is_interesting(source, args.signature, args.script, args.python, args.timeout) else 1


if __name__ == "__main__":
    sys.exit(main())
