"""`reprobot versions`: the repro against other releases of the stack, one package at a time.

Rows by default: the locked versions, the latest release of each stack package alone (the
rest as locked), and all latest together. `bisect` finds the first release of one package
where the outcome changes, trusting that it changes once in the range (the usual case for a
fix or a regression) and saying which runs it took.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from packaging.utils import canonicalize_name

from bot.rerun.environments import Installed, NotInstallable, overlay_environment, probe
from bot.rerun.lock import Lock, versions_stack
from bot.rerun.rate import LaterRuns, on_locked_versions
from bot.rerun.releases import IndexOptions, Releases, list_releases
from bot.rerun.repro_run import ReproRunner
from bot.rerun.verdict import Kind, Verdict
from bot.targets import versions_shown



def shown() -> tuple[str, ...]:
    """The packages every row names: what `versions` swaps and the foundation it runs on."""
    return tuple(canonicalize_name(n) for n in versions_shown())


@dataclass
class Row:
    label: str
    versions: dict[str, str]            # what the shown packages are in this row
    verdict: Verdict
    seconds: float
    changed: dict[str, str] = field(default_factory=dict)   # the pins that differ from the lock
    note: str = ""
    # what the overlay installed besides: requirements of `changed` the environment did not meet
    # (a pass then may be theirs as much as the swapped release's; bot/upstream/kind.py reads it)
    also: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"label": self.label, "versions": self.versions, "changed": self.changed, "also": self.also,
                "note": self.note, "verdict": self.verdict.to_dict(), "seconds": round(self.seconds, 2)}

    @classmethod
    def from_dict(cls, d: dict) -> "Row":
        return cls(d["label"], d["versions"], Verdict.from_dict(d["verdict"]), d.get("seconds", 0.0),
                   d.get("changed", {}), d.get("note", ""), d.get("also", {}))


@dataclass
class Bisection:
    """Up to two boundaries: where the outcome first changed from the low end's, and, when the
    latest release's outcome is yet another (a fix after the message changed, a new break after a
    fix), where that one first appears. ``same_bug``: the first change is the target's exception
    type raised at the same frames with another message."""
    package: str
    tried: list[tuple[str, Verdict]]       # in the order they ran
    first_changed: str | None
    last_same: str | None
    releases_in_range: int
    note: str = ""
    then_changed: str | None = None        # the second boundary: first release with the latest's outcome
    then_last: str | None = None
    same_bug: bool = False
    also: dict[str, dict[str, str]] = field(default_factory=dict)   # release -> what its row installed besides
    notes: dict[str, str] = field(default_factory=dict)             # release -> its row's note

    def _span(self, first: str | None, last: str | None, lead: str = "first") -> str | None:
        results = dict(self.tried)
        changed, before = results.get(first or ""), results.get(last or "")
        if changed is None or before is None:
            return None
        return f"{lead} {_word(changed)}: {self.package} {first} (last {_word(before)} {last})"

    def sentence(self) -> str:
        if self.note:
            return self.note
        first = self._span(self.first_changed, self.last_same)
        if first is None:
            return f"{self.package}: no change in the range"
        if self.same_bug:
            first += " — same bug, message changed"
        second = self._span(self.then_changed, self.then_last)
        return first + (f"; {second}" if second else "") + f", {len(self.tried)} runs"

    @property
    def first_passing(self) -> str | None:
        results = dict(self.tried)
        for v in (self.first_changed, self.then_changed):
            if v and results.get(v) is not None and results[v].kind is Kind.PASS:
                return v
        return None

    def to_dict(self) -> dict:
        return {"package": self.package, "first_changed": self.first_changed, "last_same": self.last_same,
                "then_changed": self.then_changed, "then_last": self.then_last, "same_bug": self.same_bug,
                "first_passing": self.first_passing,
                "releases_in_range": self.releases_in_range, "runs": len(self.tried), "note": self.note,
                "sentence": self.sentence(),
                "tried": [{"version": v, "verdict": r.to_dict(), "also": self.also.get(v, {}),
                           **({"note": self.notes[v]} if self.notes.get(v) else {})} for v, r in self.tried]}


Notify = Callable[[str], None]


class VersionRunner:
    """Builds rows (environment + one cold run each) for one repro."""

    def __init__(self, runner: ReproRunner, python: str, lock: Lock, index: IndexOptions,
                 notify: Notify = lambda _: None) -> None:
        self.runner, self.python, self.lock, self.index, self.notify = runner, python, lock, index, notify
        self.base: Installed = probe(python, [])
        # The lock is a whole closure: every pin the interpreter does not already have goes on top.
        self.locked_pins = {name: v for name, v in lock.pins.items() if self.base.version(name) != v}
        self._releases: dict[str, Releases] = {}
        # the runs on the locked versions, each a draw of the failure's rate (bot/rerun/rate.py)
        self.later: LaterRuns | None = None

    def releases(self, name: str) -> Releases:
        key = canonicalize_name(name)
        if key not in self._releases:
            self._releases[key] = list_releases(name, self.base.python, self.index)
        return self._releases[key]

    def row(self, label: str, swap: dict[str, str]) -> Row:
        merged = {**self.locked_pins, **{canonicalize_name(k): v for k, v in swap.items()}}
        pins = {k: v for k, v in merged.items() if self.base.version(k) != v}
        started = time.monotonic()
        self.notify(f"{label}: preparing the environment")
        try:
            env = overlay_environment(self.python, self.base, pins, self.index)
        except NotInstallable as e:
            verdict = Verdict(Kind.NOT_INSTALLABLE, str(e))
            return Row(label, self._shown(merged, swap), verdict, time.monotonic() - started, dict(swap))
        self.notify(f"{label}: running the repro")
        verdict = self.runner.verdict(env=env.env())
        note = env.note
        if self.later is not None and on_locked_versions(self.lock.pins, merged_swap(swap)):
            # The release set the failure was recorded on: a pass here is evidence about its rate
            # first; a failure taken to be deterministic is run again until its rate is known.
            measuring = not self.later.measured
            self.later.seen(verdict, lambda: self.runner.verdict(env=env.env()))
            if measuring and self.later.measured:
                rate = self.later.rate
                same = next((v for v in self.later.verdicts if v.kind is Kind.SAME), None)
                # the failure is still here, at its rate: the row does not read as fixed
                rated = f"flaky: {rate.words()} here" if same is not None else f"{rate.words()} here"
                note = "; ".join(n for n in (rated, note) if n)
                verdict = same or verdict
        return Row(label, self._shown({**merged, **env.pins}, swap), verdict, time.monotonic() - started,
                   dict(swap), note=note, also=env.added(pins))

    def _shown(self, pins: dict[str, str], swap: dict[str, str]) -> dict[str, str]:
        out = {}
        always = shown()
        for name in always + tuple(canonicalize_name(k) for k in swap if canonicalize_name(k) not in always):
            v = pins.get(name) or self.lock.version(name) or self.base.version(name)
            if v:
                out[name] = "git " + v.rsplit("@", 1)[-1] if "://" in v else v
        return out

    def default_rows(self, packages: tuple[str, ...] | None = None) -> list[Row]:
        packages = versions_stack() if packages is None else packages
        rows = [self.row("locked", {})]
        latest: dict[str, str] = {}
        for name in packages:
            if not self.lock.has(name):
                continue
            rel = self.releases(name)
            if rel.error or not rel.latest:
                rows.append(Row(f"{name} latest", self._shown(self.locked_pins, {}),
                                Verdict(Kind.NOT_INSTALLABLE, rel.error or "no releases listed"), 0.0))
                continue
            latest[name] = rel.latest
            if rel.latest == self.lock.version(name):
                # The locked row already ran this release: say so rather than run it twice.
                rows.append(Row(f"{name} latest", rows[0].versions, rows[0].verdict, 0.0,
                                {name: rel.latest}, note="= locked"))
                continue
            rows.append(self.row(f"{name} latest", {name: rel.latest}))
        if len([n for n in latest if latest[n] != self.lock.version(n)]) > 1:
            rows.append(self.row("all latest", latest))
        return rows

    def sweep(self, package: str, low: str | None, high: str | None) -> list[Row]:
        rel = self.releases(package)
        if rel.error:
            return [Row(f"{package}", {}, Verdict(Kind.NOT_INSTALLABLE, rel.error), 0.0)]
        return [self.row(f"{package} {v}", {package: v}) for v in rel.between(low, high)]

    def bisect(self, package: str, low: str | None = None, high: str | None = None) -> Bisection:
        rel = self.releases(package)
        if rel.error:
            return Bisection(package, [], None, None, 0, note=f"{package}: {rel.error}")
        if low is None and not self.lock.has(package):
            return Bisection(package, [], None, None, 0,
                             note=f"{package} is not in requirements.lock: give the range to search, --range A..B")
        low = low or self.lock.version(package)
        versions = rel.between(low, high)
        if len(versions) < 2:
            return Bisection(package, [], None, None, len(versions),
                             note=f"{package}: fewer than two releases between {low or 'the first'} "
                                  f"and {high or 'the latest'}")
        tried: list[tuple[str, Verdict]] = []
        cache: dict[int, Verdict] = {}
        also: dict[str, dict[str, str]] = {}
        notes: dict[str, str] = {}

        def at(i: int) -> Verdict:
            if i not in cache:
                row = self.row(f"{package} {versions[i]}", {package: versions[i]})
                cache[i] = row.verdict
                tried.append((versions[i], cache[i]))
                also[versions[i]], notes[versions[i]] = row.also, row.note
            return cache[i]

        reference = at(0)
        if reference.kind is Kind.NOT_INSTALLABLE:
            return Bisection(package, tried, None, None, len(versions),
                             note=f"{package} {versions[0]}: {reference.label()}", also=also, notes=notes)
        last = len(versions) - 1
        while last > 0 and at(last).kind is Kind.NOT_INSTALLABLE:
            last -= 1
        if last == 0 or _same(at(last), reference):
            return Bisection(package, tried, None, versions[last], len(versions),
                             note=f"{package}: the outcome is the same from {versions[0]} to {versions[last]} "
                                  f"({reference.label()}), {len(tried)} runs", also=also, notes=notes)
        final = at(last)
        # Outcomes are taken to run reference... -> other... -> final... in release order (one
        # change, or two: a message that changed before the fix). lo1/hi1 bracket the first
        # change, lo2/hi2 the first release with the final outcome; every run narrows both.
        lo1, hi1, lo2, hi2 = 0, last, 0, last
        while hi1 - lo1 > 1 or hi2 - lo2 > 1:
            lo, hi = (lo1, hi1) if hi1 - lo1 >= hi2 - lo2 else (lo2, hi2)
            probe_at = _installable_near((lo + hi) // 2, lo, hi, at)
            if probe_at is None:
                break
            v = at(probe_at)
            if _same(v, reference):
                lo1, lo2 = max(lo1, probe_at), max(lo2, probe_at)
            elif _same(v, final):
                hi1, hi2 = min(hi1, probe_at), min(hi2, probe_at)
            else:
                hi1, lo2 = min(hi1, probe_at), max(lo2, probe_at)
        gaps = [(a, b) for a, b in ((lo1, hi1), (lo2, hi2)) if b - a > 1]
        note = "" if not gaps else (f"{package}: releases between {versions[gaps[0][0]]} and {versions[gaps[0][1]]} "
                                    f"did not install; the change is somewhere in that range")
        two = hi2 != hi1
        first = cache[hi1]
        same_bug = (reference.kind is Kind.SAME and first.kind is Kind.DIFFERENT
                    and same_bug_as(first, self.runner.repro.target))
        return Bisection(package, tried, versions[hi1], versions[lo1], len(versions), note=note,
                         then_changed=versions[hi2] if two else None, then_last=versions[lo2] if two else None,
                         same_bug=same_bug, also=also, notes=notes)


def merged_swap(swap: dict[str, str]) -> dict[str, str]:
    return {canonicalize_name(k): v for k, v in swap.items()}


def same_bug_as(verdict: Verdict, target) -> bool:
    """The same exception type raised at the same innermost library frames, another message: a
    release that reworded the error, not a new bug."""
    return (verdict.exc_type == target.exc_type and tuple(verdict.frames) == tuple(target.frames)
            and verdict.signature_id != target.id)


def _word(v: Verdict) -> str:
    return {Kind.PASS: "passing", Kind.SAME: "failing"}.get(v.kind, v.kind.value)


def _same(a: Verdict, b: Verdict) -> bool:
    return a.kind is b.kind and a.signature_id == b.signature_id


def _installable_near(mid: int, lo: int, hi: int, at: Callable[[int], Verdict]) -> int | None:
    """mid, else the nearest release strictly inside (lo, hi) that installs."""
    for offset in range(0, hi - lo):
        for i in (mid + offset, mid - offset):
            if lo < i < hi and at(i).kind is not Kind.NOT_INSTALLABLE:
                return i
    return None


def bisect_bound(n: int) -> int:
    """Runs a one-boundary bisection over n releases should take at most (both ends, then halving)."""
    return math.ceil(math.log2(max(n, 2))) + 2
