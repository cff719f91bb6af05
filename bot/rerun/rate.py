"""The failure's rate, from the runs later steps make of the repro (issue #40).

Every run of repro.py on the locked versions through the folder's run recipe — `versions`'
locked row (and any row whose releases are the lock's), `watch`'s run of the locked release when
it bisects, `file --submit`'s re-check — is a draw of the same failure: it failed the recorded
way, or it passed cleanly. (A different failure, a hang, or a run that could not start says
nothing about this failure's rate and is not counted.) Those draws are kept in signature.json's
``later_runs``, by step.

A pass of a failure believed to fail every time (deterministic, or deterministic with its fixed
seed) is evidence about its rate before it is evidence about anything else: the repro is run
again on the same environment until the step has made ``MEASURE_RUNS`` runs (fewer when the
first ``RECHECK_RUNS`` after the pass pass too: it does not fail there at all, which is said, not
taken for a rate). When it failed in some of them, the estimate becomes the failure's rate — signature.json's ``rate`` (so `--resume`, the re-check and the
draft read it as flaky), reduction.json's ``flaky`` (``original``, ``repro`` = the reduction's
own measurement plus every later run, ``later``) — and is said on screen.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from bot.rerun.verdict import Kind, Verdict
from bot.store import ReproDir, write_json_atomic
from reducer.failure.flaky import DEFAULT_CAP, Rate
from reducer.failure.original import RECHECK_RUNS

# Runs a step makes in all once a believed-deterministic failure passed: as many as `reduce`
# measures a flaky original with (--flaky-runs' default).
MEASURE_RUNS = DEFAULT_CAP

Again = Callable[[], Verdict]


def _rate(d: object) -> Rate | None:
    return Rate.from_dict(d) if isinstance(d, dict) else None


def _add(a: Rate | None, b: Rate | None) -> Rate | None:
    if a is None or b is None:
        return a or b
    return Rate(a.failed + b.failed, a.runs + b.runs)


def believed_deterministic(sig: dict, reduction: dict) -> bool:
    """What the folder believes now: the repro's measured rate when the reduction measured one,
    else the failure's (a seeded failure is deterministic with its seed)."""
    flaky = reduction.get("flaky") if isinstance(reduction.get("flaky"), dict) else {}
    repro = _rate(flaky.get("repro"))
    if repro is not None:
        return repro.deterministic
    if sig.get("seed") is not None:
        return True
    rate = _rate(sig.get("rate"))
    return rate is None or rate.deterministic


@dataclass
class LaterRuns:
    """The draws one step makes of a folder's repro on the locked versions."""
    folder: ReproDir
    step: str                                   # "versions", "watch", "file --submit"
    verdicts: list[Verdict] = field(default_factory=list)
    measured: bool = False                      # a pass made this step measure the rate
    _deterministic: bool | None = None

    def believed_deterministic(self) -> bool:
        if self._deterministic is None:
            sig, red = self._read()
            self._deterministic = believed_deterministic(sig, red)
        return self._deterministic

    def seen(self, verdict: Verdict, again: Again | None = None) -> Verdict:
        """Count one run; when it is the first pass of a failure believed deterministic and
        ``again`` can run the repro once more on the same environment, measure the rate. Returns
        the verdict as given."""
        self.verdicts.append(verdict)
        if verdict.kind is Kind.PASS and again is not None and not self.measured and self.believed_deterministic():
            self.measured = True
            start = len(self.verdicts) - 1
            while len(self.verdicts) < MEASURE_RUNS:
                self.verdicts.append(again())
                mine = self.verdicts[start:]
                if len(mine) > RECHECK_RUNS and not any(v.kind is Kind.SAME for v in mine):
                    break       # it passes here every time: not a rate, another environment
        return verdict

    @property
    def rate(self) -> Rate:
        counted = [v for v in self.verdicts if v.kind in (Kind.SAME, Kind.PASS)]
        return Rate(sum(v.kind is Kind.SAME for v in counted), len(counted))

    @property
    def passed(self) -> bool:
        return any(v.kind is Kind.PASS for v in self.verdicts)

    def _read(self) -> tuple[dict, dict]:
        sig = self.folder.read_json(self.folder.signature_json)
        red = self.folder.read_json(self.folder.reduction_json) if self.folder.reduction_json.is_file() else {}
        return (sig if isinstance(sig, dict) else {}), (red if isinstance(red, dict) else {})

    def save(self) -> str | None:
        """Record this step's draws in the folder; the line to say on screen when they changed
        what the folder believes (None otherwise)."""
        now = self.rate
        if not now.runs:
            return None
        sig, red = self._read()
        was_deterministic = believed_deterministic(sig, red)
        later = sig.get("later_runs") if isinstance(sig.get("later_runs"), dict) else {}
        steps = {k: v for k, v in (later.get("steps") or {}).items() if _rate(v) is not None}
        steps[self.step] = _add(_rate(steps.get(self.step)), now).to_dict()
        total = Rate(sum(int(v["failed"]) for v in steps.values()), sum(int(v["runs"]) for v in steps.values()))
        sig["later_runs"] = {**total.to_dict(), "steps": steps}
        line = None
        became_flaky = was_deterministic and self.passed and now.failed > 0
        if became_flaky:
            # The failure is flaky: its estimate is what the later runs measured (the original's
            # confirmation runs were all failures by chance); the original's stays beside it.
            sig.setdefault("rate_confirmed", sig.get("rate"))
            line = (f"flaky: repro.py passed in a run on the locked versions ({self.step}); it {now.words()} "
                    f"there, {total.words()} in all later runs — it was taken to fail every time; "
                    f"signature.json and the draft now give this rate")
        elif was_deterministic and self.passed:
            # every run passed: no rate to give, the failure does not show here at all
            line = (f"repro.py passed in all {now.runs} of its runs on the locked versions ({self.step}): it does "
                    f"not fail here as recorded (is --python the interpreter it failed in?)")
        if "rate_confirmed" in sig:
            # a rate that came from the later runs follows them
            sig["rate"] = total.to_dict()
        write_json_atomic(self.folder.signature_json, sig)
        if red and (became_flaky or not was_deterministic):
            self._save_reduction(red, sig, total, line if became_flaky else None)
        return line

    def _save_reduction(self, red: dict, sig: dict, later: Rate, line: str | None) -> None:
        """reduction.json's ``flaky``: the repro's rate is what the reduction measured (one cold
        run for a failure taken to be deterministic) plus every later run."""
        flaky = dict(red["flaky"]) if isinstance(red.get("flaky"), dict) else {}
        verified = _rate(flaky.get("verified")) or _rate(flaky.get("repro"))
        if verified is None:
            verified = Rate(1, 1) if red.get("repro_sha256") else None
        flaky.setdefault("original", sig.get("rate_confirmed") or sig.get("rate"))
        if verified is not None:
            flaky["verified"] = verified.to_dict()
        flaky["later"] = later.to_dict()
        flaky["repro"] = _add(verified, later).to_dict()
        if line is not None:
            flaky["sentence"] = line
        write_json_atomic(self.folder.reduction_json, {**red, "flaky": flaky})


def on_locked_versions(lock_pins: dict[str, str], swap: dict[str, str]) -> bool:
    """A row whose releases are exactly the lock's: its run is a draw of the failure as recorded."""
    return all(lock_pins.get(name) == version for name, version in swap.items())
