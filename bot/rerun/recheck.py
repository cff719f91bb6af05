"""What `file --submit` checks in the folder before it sends anything (issue #39).

1. repro.py is the one the reduction verified (bot/verified.py): no digest, or a different
   one, and it is not filed (exit 9) unless ``--unverified`` says to file it as it is.
2. It still fails with the recorded signature: one more run through the folder's own way of
   running it (bot/rerun/repro_run.py, the one run recipe: launch line, arguments, the
   environment its runs set), in the interpreter ``--python`` names. A flaky repro gets the few
   runs that make missing a real failure unlikely; a repro that passes, fails differently,
   hangs or cannot start is not filed (exit 5, no flag: reduce again, or run it where it failed).
3. Its runs count toward the failure's rate (bot/rerun/rate.py): when a repro taken to fail every
   time passes, it is run to ``MEASURE_RUNS`` runs; still failing in some of them, it is flaky, the
   folder says so, and nothing is filed this time (exit 7): the draft, built as if it failed every
   time, is previewed again with its rate first.
"""
from __future__ import annotations

import math
from typing import Callable

from bot.rerun.rate import LaterRuns
from bot.rerun.repro_run import ReproRunner, StoredRepro
from bot.rerun.verdict import Kind, Verdict
from bot.store import ReproDir
from bot.verified import Verification, verification
from reducer.errors import ExitCode, ReprobotError

MAX_RUNS = 5        # a flaky repro's re-check: enough runs to see a 50% failure with 97% certainty
UNVERIFIED_FLAG = "--unverified"


def check_verified(repro: ReproDir, accept: bool, notify: Callable[[str], None]) -> Verification:
    """Refuse (one line) a repro.py that is not the one its reduction verified, unless ``accept``."""
    v = verification(repro)
    if v.ok:
        return v
    if v.state == "missing":
        raise ReprobotError(f"not filed: {repro.path.name} has no repro.py to re-run (the failure was recorded but "
                            "not reduced); run `reprobot reduce` on the script first", ExitCode.BAD_INPUT)
    why = ("repro.py is not the one the reduction verified (it changed after `reduce` wrote it)"
           if v.state == "changed" else
           "reduction.json records no verified repro.py (a reduction that stopped before its check, or a "
           "folder from an earlier reprobot)")
    if not accept:
        raise ReprobotError(f"not filed: {why}; run `reprobot reduce` on the script again (with --resume it reuses "
                            f"the runs it made), or pass {UNVERIFIED_FLAG} to file repro.py as it is",
                            ExitCode.BAD_INPUT)
    notify(f"{why}: filed as it is ({UNVERIFIED_FLAG}), after one more run")
    return v


def runs_for(repro: ReproDir) -> int:
    """One run for a failure that shows every time; for a flaky one, enough that a repro which
    still fails at its measured rate is caught (at most MAX_RUNS)."""
    try:
        sig = repro.read_json(repro.signature_json)
        red = repro.read_json(repro.reduction_json) if repro.reduction_json.is_file() else {}
    except ReprobotError:
        return 1
    rate = (red.get("flaky") or {}).get("repro") if isinstance(red, dict) and isinstance(red.get("flaky"), dict) \
        else None
    rate = rate or (sig.get("rate") if isinstance(sig, dict) and sig.get("seed") is None else None)
    try:
        p = float(rate["failed"]) / float(rate["runs"]) if rate else 1.0
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return 1
    if p >= 1.0:
        return 1
    if p <= 0.0:
        return MAX_RUNS
    return max(1, min(MAX_RUNS, math.ceil(math.log(0.03) / math.log(1.0 - p))))


def rerun(repro: ReproDir, python: str, notify: Callable[[str], None]) -> Verdict:
    """Run repro.py as the folder records it until it fails with its signature (at most
    ``runs_for``); refuse (one line) when it never does."""
    stored = StoredRepro.load(repro)
    runs = runs_for(repro)
    notify(f"re-check: running repro.py once more before filing" + (f" (up to {runs} runs: it is flaky)"
                                                                      if runs > 1 else ""))
    runner = ReproRunner(stored, python)
    # every run is a draw of the failure's rate (bot/rerun/rate.py): a pass of a failure taken to
    # fail every time makes the re-check measure the rate before anything is concluded
    later = LaterRuns(repro, "file --submit")
    try:
        verdict = later.seen(runner.verdict(), runner.verdict)
        while verdict.kind is not Kind.SAME and runner.runs < runs and verdict.kind in (Kind.PASS, Kind.DIFFERENT):
            verdict = later.seen(runner.verdict())
    finally:
        runner.close()
        line = later.save()
    if line is not None:
        notify(line)
        if later.rate.failed:
            # Still the failure, but flaky: the draft was built saying it fails every time.
            raise ReprobotError(f"not filed: repro.py passed in the re-check though it was taken to fail every "
                                f"time; it {later.rate.words()} (flaky). signature.json and reduction.json now "
                                f"give that rate: preview the draft again (`reprobot file --dry-run`), which states "
                                f"it, then file it", ExitCode.FLAKY)
    if verdict.kind is Kind.SAME:
        notify(f"re-check: it fails the same way ({stored.target.id}, {verdict.wall_time or 0:.1f}s)")
        return verdict
    got = {Kind.PASS: "it ran without the failure", Kind.TIMEOUT: "it did not finish in time",
           Kind.ERROR: "it could not run"}.get(verdict.kind, "it failed differently")
    detail = f" ({verdict.detail[:160]})" if verdict.detail else ""
    raise ReprobotError(f"not filed: repro.py no longer fails with the recorded signature {stored.target.id}: {got}"
                        f"{detail}; run it where it failed (--python), or reduce it again", ExitCode.NO_FAILURE)
