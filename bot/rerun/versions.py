"""`reprobot versions`: the repro against other releases of the stack, one package at a time.

Rows by default: the locked versions, the latest release of each stack package alone (the
rest as locked), and all latest together. `bisect` finds the first release of one package
where the outcome changes, trusting that it changes once in the range (the usual case for a
fix or a regression) and saying which runs it took.

Five readings on top of the repro's own verdicts (issue #42, the real-bug benchmark's fresh parts):

- The reduced repro is not always one a fixed release runs through: reduce keeps only what the
  failure needs, so on the release that fixed it the repro can fail another way (a callback
  emptied to ``pass`` that the fix now calls, a model shrunk below what the fixed code accepts).
  Where a latest row or a bisect's boundary fails otherwise, the user's script (original.py;
  seeded.py when reduce fixed a seed, so a flaky failure cannot pass there by chance) runs once in
  the same environment, through the same run recipe and timeout, and the row carries its verdict
  (``original``): a pass names the release as the fix, a failure the recorded way says it still
  fails. At most the boundaries (two) and the latest rows get that run.
- The other way round, a latest row where the repro *passes* is a fix only if the user's script,
  run there as well, passes too: a reduced repro can pass on a release that did not fix what the
  user hit (transformers-31110: the repro's decode passed on 5.24.0 while the user's script, whose
  own metrics decoded -100, failed there with the tokenizer's newer message). The row keeps the
  repro's pass and carries the user's script's verdict: a failure the recorded way makes the row
  read as still failing, and a failure of another kind leaves the pass unconfirmed. Neither is
  called a fix in a draft (bot/store.py); the classifier counts an unconfirmed pass only against a
  verdict no run confirmed (bot/upstream/kind.py).
- The repro can also outlive the fix: on the fixing release it fails the *same* way while the
  user's script passes (reduce kept what the failure needs, not what the fix changed: a
  6-statement Seq2SeqTrainer repro kept failing through transformers 4.37.2 while the user's
  script passed from 4.35.0). Where a bisect's boundaries name no pass and the repro fails the same
  way just below its first change, or the first change passes only for the user's script, the
  user's script runs there, and where it passes it is bisected below (``script_fix``,
  ``script_tried``): a few runs of the user's script, and the fix named as the first release where
  it passes.
- A row can fail otherwise on a companion of the user's that the swapped release needs newer and
  does not declare, or declares only as an extra (transformers-28293: every transformers row from
  4.38 over the user's accelerate 0.25.0). Where the other failure names a package of the lock, the
  row runs again with it at the swapped release's time (bot/rerun/companions.py); the row says what
  moved (``moved``, and in ``also``), and a pass there reads as the next reading says.
- A pass whose row installed, beside the swapped release, another release of a package the
  failure was raised through (its signature's library frames; ``also``) is not the swapped
  release's fix: the user's stack has that package at the failing release, and the pass may be
  the other release's (trl 0.12.2 pinned ``transformers<4.47`` instead of fixing the call; its row
  ran transformers 4.46.3). The bisect tells such a pass from a clean one, as it tells two
  failures apart, so a later clean pass is found and named as the fix; the sentence names what
  was installed beside every passing boundary either way. One control run can clear such a pass:
  the same moved releases beside the last release that failed the same way; failing the same way
  there, they are not what passed, and the pass is the swapped release's (``controls``; the
  companion moved for transformers-28293, accelerate 0.34.2, required safetensors 0.4.3, the
  package its failure is raised through).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from packaging.utils import canonicalize_name

from bot.rerun import companions
from bot.rerun.environments import Environment, Installed, NotInstallable, overlay_environment, probe
from bot.rerun.lock import Lock, versions_stack
from bot.rerun.rate import LaterRuns, on_locked_versions
from bot.rerun.releases import IndexOptions, Releases, list_releases
from bot.rerun.repro_run import ReproRunner
from bot.rerun.verdict import Kind, Verdict
from bot.store import releases_words
from bot.targets import package_targets, versions_shown



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
    # the user's script run in this row's environment, where the repro failed otherwise or passed
    # on a latest row (see the module's docstring); None where it was not run
    original: Verdict | None = None
    # companions of the user's lock the row moved to the swapped release's time, after it failed
    # otherwise with the lock's (bot/rerun/companions.py); also listed in `also`
    moved: dict[str, str] = field(default_factory=dict)

    @property
    def judged(self) -> Verdict:
        """What the row says about the failure: the repro's verdict, or the user's script's."""
        return judged(self.verdict, self.original)

    def to_dict(self) -> dict:
        return {"label": self.label, "versions": self.versions, "changed": self.changed, "also": self.also,
                "note": self.note, "verdict": self.verdict.to_dict(), "seconds": round(self.seconds, 2),
                "original": self.original.to_dict() if self.original is not None else None, "moved": self.moved}

    @classmethod
    def from_dict(cls, d: dict) -> "Row":
        original = d.get("original")
        return cls(d["label"], d["versions"], Verdict.from_dict(d["verdict"]), d.get("seconds", 0.0),
                   d.get("changed", {}), d.get("note", ""), d.get("also", {}),
                   Verdict.from_dict(original) if isinstance(original, dict) else None, d.get("moved") or {})


def judged(repro: Verdict, original: Verdict | None) -> Verdict:
    """A run's answer about the failure: the repro's verdict, unless the repro failed otherwise and
    the user's script, run in the same environment, passed or failed the recorded way (the repro's
    other failure is then the reduction's, not the release's), or the repro passed and the user's
    script still failed the recorded way (the release did not fix what the user hit)."""
    if original is None:
        return repro
    if repro.kind is Kind.DIFFERENT and original.kind in (Kind.PASS, Kind.SAME):
        return original
    if repro.kind is Kind.PASS and original.kind is Kind.SAME:
        return original
    return repro


# What the user's script did where it ran beside the repro: after the repro passed, or after it
# failed otherwise.
_BESIDE_A_PASS = {
    Kind.PASS: "the user's script passes too",
    Kind.SAME: "the repro passes there, but the user's script still fails the same way",
    Kind.DIFFERENT: "the repro passes there, but the user's script fails otherwise: not confirmed as a fix",
}
_BESIDE_ANOTHER_FAILURE = {
    Kind.PASS: "the repro fails otherwise there; the user's script passes",
    Kind.SAME: "the repro fails otherwise there; the user's script still fails",
    Kind.DIFFERENT: "the user's script fails otherwise too",
}


def original_words(original: Verdict | None, repro: Verdict | None = None) -> str:
    """What the user's script did where it ran beside the repro (empty: it was not run)."""
    if original is None:
        return ""
    words = _BESIDE_A_PASS if repro is not None and repro.kind is Kind.PASS else _BESIDE_ANOTHER_FAILURE
    return words.get(original.kind) or f"the user's script: {original.label()}"


@dataclass
class Bisection:
    """Up to two boundaries: where the outcome first changed from the low end's, and, when the
    latest release's outcome is yet another (a fix after the message changed, a new break after a
    fix, a clean pass after one that came with the failure's own package moved), where that one
    first appears. ``same_bug``: the first change is the target's exception type raised at the
    same frames with another message."""
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
    originals: dict[str, Verdict] = field(default_factory=dict)     # boundary -> the user's script there
    unresolved: str = ""        # the second change's bracket, where nothing inside it installed
    # the distributions the failure was raised through -> their release in the user's stack
    own: dict[str, str] = field(default_factory=dict)
    # the repro outlived the fix: the first release where the user's script passes while the repro
    # still fails the same way, and the releases the user's script ran on to find it (in order)
    script_fix: str | None = None
    script_tried: list[tuple[str, Verdict]] = field(default_factory=list)
    # a pass that came with the failure's own packages moved, cleared by a control: the same moved
    # releases beside the last release that failed the same way still fail the same way there, so
    # the pass is the swapped release's (release -> that failing release)
    controls: dict[str, str] = field(default_factory=dict)

    def judged(self, version: str | None) -> Verdict | None:
        verdict = dict(self.tried).get(version or "")
        return None if verdict is None else judged(verdict, self.originals.get(version or ""))

    def moved(self, version: str) -> dict[str, str]:
        """Of what the release's row installed beside it, the failure's own packages (none where a
        control cleared them)."""
        if version in self.controls:
            return {}
        return self.moved_own(version)

    def moved_own(self, version: str) -> dict[str, str]:
        return {n: v for n, v in (self.also.get(version) or {}).items() if canonicalize_name(n) in self.own}

    def _passes(self, version: str | None) -> bool:
        verdict = self.judged(version)
        return verdict is not None and verdict.kind is Kind.PASS

    def _details(self, version: str) -> list[str]:
        out = [w for w in [original_words(self.originals.get(version))] if w]
        also = self.also.get(version) or {}
        if also and self._passes(version):
            out.append(f"with {releases_words(also)} installed beside it")
        if version in self.controls:
            out.append(f"{releases_words(self.moved_own(version))} beside {self.package} {self.controls[version]} "
                       "still fails the same way")
        return out

    def _span(self, first: str | None, last: str | None, head: str | None = None) -> str | None:
        changed, before = self.judged(first), self.judged(last)
        if changed is None or before is None or first is None or last is None:
            return None
        if changed.kind is not Kind.PASS:
            # where the user's script still fails, the boundary is still where the repro changed
            changed = dict(self.tried)[first]
        # a pass that came with the failure's own package moved: the release before a clean pass
        last_words = f"last {last}" if self._passes(last) and self.moved(last) else f"last {_word(before)} {last}"
        head = head or f"first {_word(changed)}"
        text = f"{head}: {self.package} {first} ({'; '.join(self._details(first) + [last_words])})"
        moved = self.moved(first) if self._passes(first) else {}
        if moved:
            mine = ", ".join(f"{n} {self.own[canonicalize_name(n)]}" for n in sorted(moved))
            text += (f" — not counted as the fix: the failure is raised through {', '.join(sorted(moved))}, "
                     f"and the user has {mine}")
        return text

    def _outlived(self) -> str:
        if not self.script_fix:
            return ""
        from packaging.version import InvalidVersion, Version
        try:
            before = sorted((Version(v), v) for v, r in self.script_tried
                            if r.kind is not Kind.PASS and Version(v) < Version(self.script_fix))
        except InvalidVersion:
            before = []
        last = f"; last failing {before[-1][1]}" if before else ""
        return (f"the user's script passes from {self.package} {self.script_fix} (the repro still fails the same "
                f"way there: reduce kept what the failure needs, not what the fix changed{last})")

    def sentence(self) -> str:
        if self.note:
            return self.note
        first = self._span(self.first_changed, self.last_same)
        if first is None:
            return f"{self.package}: no change in the range"
        if self.script_fix:
            first = f"{self._outlived()}; {first}"
        if self.same_bug:
            first += " — same bug, message changed"
        head = None
        then = self.then_changed or ""
        if self._passes(self.first_changed) and self.moved(self.first_changed or "") and self._passes(then) \
                and not self.moved(then):
            head = f"first passing with {', '.join(sorted(self.moved(self.first_changed or '')))} as the user has it"
        second = self._span(self.then_changed, self.then_last, head)
        return first + (f"; {second}" if second else "") + (f"; {self.unresolved}" if self.unresolved else "") \
            + f", {len(self.tried)} runs"

    @property
    def first_passing(self) -> str | None:
        """The first release that passes (the repro, or the user's script where the repro failed
        otherwise) with none of the failure's own packages moved beside it: the fix."""
        if self.script_fix:
            return self.script_fix      # below the first change: the repro outlived the fix
        for v in (self.first_changed, self.then_changed):
            if v and self._passes(v) and not self.moved(v):
                return v
        return None

    def to_dict(self) -> dict:
        return {"package": self.package, "first_changed": self.first_changed, "last_same": self.last_same,
                "then_changed": self.then_changed, "then_last": self.then_last, "same_bug": self.same_bug,
                "first_passing": self.first_passing, "own": self.own,
                "releases_in_range": self.releases_in_range, "runs": len(self.tried), "note": self.note,
                "unresolved": self.unresolved,
                "sentence": self.sentence(),
                "tried": [{"version": v, "verdict": r.to_dict(), "also": self.also.get(v, {}),
                           **({"note": self.notes[v]} if self.notes.get(v) else {}),
                           **({"original": self.originals[v].to_dict()} if v in self.originals else {})}
                          for v, r in self.tried],
                "script_fix": self.script_fix,
                "script_tried": [{"version": v, "original": r.to_dict()} for v, r in self.script_tried],
                "controls": self.controls}


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

    def _environment(self, swap: dict[str, str]) -> tuple[dict[str, str], dict[str, str], Environment]:
        """The row's pins (the lock's, `swap` over them), those the base lacks, and the overlay with
        them (NotInstallable says why not; a cached overlay is reused, not built again)."""
        merged = {**self.locked_pins, **{canonicalize_name(k): v for k, v in swap.items()}}
        pins = {k: v for k, v in merged.items() if self.base.version(k) != v}
        return merged, pins, overlay_environment(self.python, self.base, pins, self.index)

    def row(self, label: str, swap: dict[str, str], original: bool = False) -> Row:
        """One row; ``original``: where the repro fails otherwise, the user's script runs there too."""
        merged = {**self.locked_pins, **{canonicalize_name(k): v for k, v in swap.items()}}
        started = time.monotonic()
        self.notify(f"{label}: preparing the environment")
        try:
            merged, pins, env = self._environment(swap)
        except NotInstallable as e:
            verdict = Verdict(Kind.NOT_INSTALLABLE, str(e))
            return Row(label, self._shown(merged, swap), verdict, time.monotonic() - started, dict(swap))
        self.notify(f"{label}: running the repro")
        verdict = self.runner.verdict(env=env.env())
        note = env.note
        moved: dict[str, str] = {}
        if swap and verdict.kind is Kind.DIFFERENT:
            # a companion the swapped release needs newer than the user's, undeclared or an extra:
            # the row runs again with it at the swapped release's time (bot/rerun/companions.py)
            moved = companions.of_the_time(companions.to_move(verdict, self.lock.pins, swap), swap,
                                           self.lock.pins, self.base.python, self.index)
            again = self._with(label, swap, moved) if moved else None
            if again is not None:
                note = "; ".join(n for n in (companions.note(moved, self.lock.pins, verdict), again[2].note) if n)
                merged, pins, env, verdict = again
            else:
                moved = {}
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
        # where the repro fails otherwise, the user's script says whether the release still fails;
        # where it passes (read as a fix: the draft's "passes on", the classifier's "a fix shipped"),
        # whether it fixed what the user hit (transformers-31110: the reduced repro passed on a
        # release where the user's own metrics still failed)
        why = {Kind.DIFFERENT: "the repro fails otherwise", Kind.PASS: "the repro passes"}.get(verdict.kind)
        by_user = self._original(label, env, why) if original and why else None
        return Row(label, self._shown({**merged, **env.pins}, swap), verdict, time.monotonic() - started,
                   dict(swap), note=note, also={**moved, **env.added(pins)}, original=by_user, moved=moved)

    def _with(self, label: str, swap: dict[str, str], moved: dict[str, str]
              ) -> tuple[dict[str, str], dict[str, str], Environment, Verdict] | None:
        """The row's environment with `moved` beside the swap, and the repro's verdict there (None:
        it does not install, or the repro could not run there: the first reading stands)."""
        self.notify(f"{label}: the repro fails otherwise; running it again with "
                    + releases_words(moved) + " (of the same time)")
        try:
            merged, pins, env = self._environment({**swap, **moved})
        except NotInstallable:
            return None
        verdict = self.runner.verdict(env=env.env())
        if verdict.kind in (Kind.ERROR, Kind.NOT_INSTALLABLE):
            return None
        return merged, pins, env, verdict

    def _original(self, label: str, env: Environment, why: str = "the repro fails otherwise") -> Verdict | None:
        """The user's script in `env`, through the folder's run recipe (None: the folder has none)."""
        if not self.runner.repro.has_original():
            return None
        self.notify(f"{label}: {why}; running the user's script there")
        return self.runner.original_verdict(env=env.env())

    def original_at(self, label: str, swap: dict[str, str], why: str = "the repro fails otherwise") -> Verdict | None:
        """The user's script in the environment a row with `swap` ran in (its overlay is cached)."""
        try:
            _, _, env = self._environment(swap)
        except NotInstallable:
            return None
        return self._original(label, env, why)

    def script_fix(self, package: str, versions: list[str], top: int,
                   known: dict[str, Verdict]) -> tuple[str | None, list[tuple[str, Verdict]]]:
        """Where the repro outlived the fix: the user's script at ``versions[top]`` (the last
        release where the repro fails the same way); when it passes there, the first release in
        ``versions[1..top]`` where it passes, by bisection (the user's own stack, ``versions[0]``,
        is where it failed). ``known``: the user's script's verdicts already run. Returns the
        release (None when the user's script fails at ``top`` too) and the runs, in order."""
        ran: list[tuple[str, Verdict]] = []

        def passes(i: int) -> bool | None:
            v = versions[i]
            if v not in known:
                by_user = self.original_at(f"{package} {v}", {package: v},
                                           "the repro fails the same way")
                if by_user is None:
                    return None
                known[v] = by_user
                ran.append((v, by_user))
            return known[v].kind is Kind.PASS

        if top < 1 or not passes(top):
            return None, ran
        lo, hi = 0, top
        while hi - lo > 1:
            mid = (lo + hi) // 2
            # a release the user's script cannot run on says nothing: the search goes on above it
            if passes(mid):
                hi = mid
            else:
                lo = mid
        return versions[hi], ran

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
            rows.append(self.row(f"{name} latest", {name: rel.latest}, original=True))
        if len([n for n in latest if latest[n] != self.lock.version(n)]) > 1:
            rows.append(self.row("all latest", latest, original=True))
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
        own = self.own_packages()

        def at(i: int) -> Verdict:
            if i not in cache:
                row = self.row(f"{package} {versions[i]}", {package: versions[i]})
                cache[i] = row.verdict
                tried.append((versions[i], cache[i]))
                also[versions[i]], notes[versions[i]] = row.also, row.note
            return cache[i]

        def outcome(i: int) -> tuple:
            """What the bisect tells apart: the verdict, and for a pass which of the failure's own
            packages its row moved (a pass with them moved is not the release's fix)."""
            v = at(i)
            moved = frozenset(canonicalize_name(n) for n in also[versions[i]]) & set(own) \
                if v.kind is Kind.PASS else frozenset()
            return v.kind, v.signature_id, moved

        def result(**kw) -> Bisection:
            return Bisection(package, tried, releases_in_range=len(versions), also=also, notes=notes, own=own, **kw)

        reference = at(0)
        if reference.kind is Kind.NOT_INSTALLABLE:
            return result(first_changed=None, last_same=None, note=f"{package} {versions[0]}: {reference.label()}")
        last = len(versions) - 1
        while last > 0 and at(last).kind is Kind.NOT_INSTALLABLE:
            last -= 1
        if last == 0 or outcome(last) == outcome(0):
            return result(first_changed=None, last_same=versions[last],
                          note=f"{package}: the outcome is the same from {versions[0]} to {versions[last]} "
                               f"({reference.label()}), {len(tried)} runs")
        lo1, hi1, lo2, hi2 = brackets(last, outcome, at)
        gaps = [(a, b) for a, b in ((lo1, hi1), (lo2, hi2)) if b - a > 1]
        words = [f"{package}: releases between {versions[a]} and {versions[b]} did not install; the change is "
                 "somewhere in that range" for a, b in gaps]
        # a gap at the first change leaves nothing to name; one at the second (a later change past
        # releases that would not install) is said after what was found
        note, unresolved = (words[0], "") if gaps and gaps[0] == (lo1, hi1) else ("", words[0] if words else "")
        two = hi2 != hi1
        first = cache[hi1]
        same_bug = (reference.kind is Kind.SAME and first.kind is Kind.DIFFERENT
                    and same_bug_as(first, self.runner.repro.target))
        # where the repro fails otherwise at a boundary, the user's script says whether the release
        # fixed it (at most two more runs, in environments already built)
        originals = {}
        for i in sorted({hi1, hi2}):
            if cache[i].kind is Kind.DIFFERENT:
                by_user = self.original_at(f"{package} {versions[i]}", {package: versions[i]})
                if by_user is not None:
                    originals[versions[i]] = by_user
        # The repro can outlive the fix: reduce keeps what the failure needs, not what the fix
        # changed, so on the fixing release the repro can still fail the same way while the user's
        # script passes (the real-bugs benchmark's transformers-24567: a 6-statement repro that kept
        # failing through 4.37.2 while the user's script passed from 4.35.0). Where no boundary
        # passes and the repro fails the same way just before its first change, the user's script
        # runs there; if it passes, it is bisected below (a few runs of the user's script).
        # A pass at the first change that is the user's script's (the repro failed otherwise there)
        # may be later than the fix too: the repro may have failed the same way for a while after it
        # (transformers-31435: a repro that reached the same error by another path through 4.44.2,
        # fixed for the user's script in 4.42.0).
        script_fix, script_runs = None, []
        passed = any(judged(cache[i], originals.get(versions[i])).kind is Kind.PASS for i in {hi1, hi2})
        first_by_user = cache[hi1].kind is Kind.DIFFERENT and \
            judged(cache[hi1], originals.get(versions[hi1])).kind is Kind.PASS
        if (first_by_user or not passed) and cache[lo1].kind is Kind.SAME:
            script_fix, script_runs = self.script_fix(package, versions, lo1, dict(originals))
        found = result(first_changed=versions[hi1], last_same=versions[lo1], note=note, unresolved=unresolved,
                       then_changed=versions[hi2] if two else None, then_last=versions[lo2] if two else None,
                       same_bug=same_bug, originals=originals, script_fix=script_fix, script_tried=script_runs)
        found.controls = self._controls(found, versions, cache, {hi1, hi2})
        return found

    def _controls(self, found: Bisection, versions: list[str], cache: dict[int, Verdict],
                  boundaries: set[int]) -> dict[str, str]:
        """For a boundary that passed with the failure's own packages moved beside it (a companion's
        requirement, or the swapped release's), one control run: the same moved releases beside the
        last release below it that failed the same way. Failing the same way there, the moved
        packages did not fix it and the pass is the swapped release's (release -> the control's
        release). One run a boundary, at most two."""
        out: dict[str, str] = {}
        for i in sorted(boundaries):
            moved = found.moved_own(versions[i])
            below = [j for j in cache if j < i and cache[j].kind is Kind.SAME]
            if cache[i].kind is not Kind.PASS or not moved or not below:
                continue
            last = versions[max(below)]
            row = self.row(f"{found.package} {last} with {releases_words(moved)}", {found.package: last, **moved})
            if row.verdict.kind is Kind.SAME:
                out[versions[i]] = last
        return out

    def own_packages(self) -> dict[str, str]:
        """The distributions the failure was raised through (its signature's library frames), each
        with its release in the user's stack."""
        targets = package_targets()
        out: dict[str, str] = {}
        for frame in self.runner.repro.target.frames:
            top = frame.split(":", 1)[0].split("/", 1)[0].removesuffix(".py")
            target = targets.get(top)
            for dist in (target.dists if target else (top,)):
                name = canonicalize_name(dist)
                version = self.lock.version(name) or self.base.version(name)
                if version:
                    out[name] = version
        return out


def merged_swap(swap: dict[str, str]) -> dict[str, str]:
    return {canonicalize_name(k): v for k, v in swap.items()}


def same_bug_as(verdict: Verdict, target) -> bool:
    """The same exception type raised at the same innermost library frames, another message: a
    release that reworded the error, not a new bug."""
    return (verdict.exc_type == target.exc_type and tuple(verdict.frames) == tuple(target.frames)
            and verdict.signature_id != target.id)


def _word(v: Verdict) -> str:
    return {Kind.PASS: "passing", Kind.SAME: "failing"}.get(v.kind, v.kind.value)


def brackets(last: int, outcome: Callable[[int], tuple], at: Callable[[int], Verdict]) -> tuple[int, int, int, int]:
    """(lo1, hi1, lo2, hi2) over releases 0..last: outcomes are taken to run reference... ->
    other... -> final... in release order (one change, or two: a message that changed before the
    fix); lo1/hi1 bracket the first change, lo2/hi2 the first release with the final outcome, and
    every run narrows both. A bracket with nothing installable inside is left as it is while the
    other is narrowed still (trl 0.27.2-0.29.1 would not install, and the fix at 0.15.1, in the
    other bracket, was never tried)."""
    lo1, hi1, lo2, hi2 = 0, last, 0, last
    exhausted: set[tuple[int, int]] = set()
    while True:
        open_ = [(a, b) for a, b in ((lo1, hi1), (lo2, hi2)) if b - a > 1 and (a, b) not in exhausted]
        if not open_:
            return lo1, hi1, lo2, hi2
        lo, hi = max(open_, key=lambda ab: ab[1] - ab[0])
        probe_at = _installable_near((lo + hi) // 2, lo, hi, at)
        if probe_at is None:
            exhausted.add((lo, hi))
        elif outcome(probe_at) == outcome(0):
            lo1, lo2 = max(lo1, probe_at), max(lo2, probe_at)
        elif outcome(probe_at) == outcome(last):
            hi1, hi2 = min(hi1, probe_at), min(hi2, probe_at)
        else:
            hi1, lo2 = min(hi1, probe_at), max(lo2, probe_at)


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
