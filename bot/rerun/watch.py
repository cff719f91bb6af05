"""`reprobot watch`: every stored repro (and every issue filed from one) against the releases
published since the last check.

For each package of a repro's stack with new releases, the newest is run: the same failure is
"still fails on X"; anything else is bisected from the last release checked, giving "passes since
X" (the first passing release) and/or "fails differently since X". Findings are kept in a state
file per repro (``watch.json`` in the folder, or ``--state DIR``), so each is found once.

For a filed issue each finding becomes ONE comment carrying a hidden marker. The marker, not the
state file, is what makes posting idempotent: a run that crashed after the POST and before the
state was written finds its own comment (the filing identity's, marker at top level) and only
records it. Nothing else is ever done to the issue: no close, reopen, label or edit.
"""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from bot.rerun.lock import Lock, read_lock, versions_stack
from bot.rerun.rate import LaterRuns
from bot.rerun.releases import IndexOptions
from bot.rerun.repro_run import ReproRunner, StoredRepro
from bot.rerun.verdict import Kind
from bot.rerun.versions import Row, VersionRunner
from bot.store import ReproDir, write_json_atomic

STILL, PASSES, DIFFERENT = "still fails on", "passes since", "fails differently since"
MARKER = "<!-- reprobot:watch={sig}:{key} -->"

Notify = Callable[[str], None]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


@dataclass
class Finding:
    package: str
    kind: str               # STILL, PASSES or DIFFERENT
    version: str
    row: dict               # the table row of the run that showed it
    lock_diff: list[str]    # "- name==old" / "+ name==new" lines against the repro's lock
    detail: str = ""        # the other failure's one line, the bisection's sentence
    found_at: str = ""
    posted: dict[str, str] = field(default_factory=dict)    # "owner/repo#N" -> comment URL

    @property
    def key(self) -> str:
        return f"{canonicalize_name(self.package)}=={self.version}:{self.kind.replace(' ', '-')}"

    def sentence(self) -> str:
        return f"{self.kind} {self.package} {self.version}"

    def to_dict(self) -> dict:
        return {"key": self.key, "package": self.package, "kind": self.kind, "version": self.version,
                "sentence": self.sentence(), "row": self.row, "lock_diff": self.lock_diff,
                "detail": self.detail, "found_at": self.found_at, "posted": self.posted}

    @classmethod
    def from_dict(cls, d: dict) -> "Finding":
        return cls(d["package"], d["kind"], d["version"], d.get("row") or {}, list(d.get("lock_diff") or []),
                   d.get("detail", ""), d.get("found_at", ""), dict(d.get("posted") or {}))


@dataclass
class WatchState:
    path: Path
    checked: dict[str, str] = field(default_factory=dict)     # package -> newest release checked
    findings: list[Finding] = field(default_factory=list)
    last_check: str = ""

    @classmethod
    def load(cls, path: Path) -> "WatchState":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path)
        return cls(path, dict(data.get("checked") or {}), [Finding.from_dict(f) for f in data.get("findings") or []],
                   str(data.get("last_check") or ""))

    def save(self) -> None:
        write_json_atomic(self.path, {"last_check": self.last_check, "checked": self.checked,
                                      "findings": [f.to_dict() for f in self.findings]})

    def add(self, finding: Finding) -> bool:
        if any(f.key == finding.key for f in self.findings):
            return False
        self.findings.append(finding)
        return True


def state_path(folder: ReproDir, state_dir: Path | None) -> Path:
    return (state_dir / f"{folder.path.name}.json") if state_dir else folder.path / "watch.json"


def repro_folders(root: Path) -> list[ReproDir]:
    return [ReproDir(p) for p in sorted(root.iterdir()) if (p / "signature.json").is_file()] if root.is_dir() else []


def watched_packages(repro: StoredRepro, lock: Lock) -> list[str]:
    """The stack's packages the lock pins, and every locked package the failure's frames pass
    through (a frame ``fakelib/core.py:f`` names ``fakelib``)."""
    in_frames = {canonicalize_name(f.split("/", 1)[0]) for f in repro.target.frames}
    names = [n for n in lock.pins if n in in_frames or n in {canonicalize_name(s) for s in versions_stack()}]
    return sorted(names)


def _newer(versions: list[str], than: str | None) -> list[str]:
    if than is None:
        return list(versions)
    try:
        floor = Version(than)
    except InvalidVersion:
        return []
    return [v for v in versions if Version(v) > floor]


def _lock_diff(lock: Lock, row: Row) -> list[str]:
    out = []
    for name, version in sorted(row.changed.items()):
        old = lock.version(name)
        if old != version:
            out += ([f"- {name}=={old}"] if old else []) + [f"+ {name}=={version}"]
    return out


def check_folder(folder: ReproDir, python: str, index: IndexOptions | None, state: WatchState,
                 packages: tuple[str, ...] | None = None, notify: Notify = lambda _: None,
                 say_rate: Notify | None = None) -> list[Finding]:
    """Run the repro on the releases new since the last check; the new findings (also added to
    ``state``, which the caller saves). A run on the locked releases (the low end of a
    bisection) counts toward the failure's rate; ``say_rate`` (default ``notify``) hears the line
    when it changed it (bot/rerun/rate.py)."""
    repro = StoredRepro.load(folder)
    lock = read_lock(folder.requirements_lock)
    runner = ReproRunner(repro, python)
    found: list[Finding] = []
    later = LaterRuns(folder, "watch")
    try:
        vr = VersionRunner(runner, runner.runner.python, lock, index or IndexOptions(tuple(lock.index_options)), notify)
        vr.later = later
        for name in (packages or watched_packages(repro, lock)):
            rel = vr.releases(name)
            if rel.error:
                notify(f"{folder.path.name}: {name}: {rel.error}")
                continue
            since = state.checked.get(name) or lock.version(name)
            new = _newer(rel.versions, since)
            if not new:
                continue
            latest = new[-1]
            row = vr.row(f"{name} {latest}", {name: latest})
            if row.verdict.kind is Kind.NOT_INSTALLABLE:
                # Not a finding, and not checked: the next run tries again (a dependency may appear).
                notify(f"{folder.path.name}: {name} {latest}: {row.verdict.label()}")
                continue
            if row.verdict.kind is Kind.SAME:
                found.append(Finding(name, STILL, latest, row.to_dict(), _lock_diff(lock, row)))
            else:
                found += _bisected(vr, lock, name, since, latest, row)
            state.checked[name] = latest
    finally:
        runner.close()
        line = later.save()
        if line:
            (say_rate or notify)(f"{folder.path.name}: {line}")
    now = _now()
    for f in found:
        f.found_at = now
    state.last_check = now
    return [f for f in found if state.add(f)]


def _bisected(vr: VersionRunner, lock: Lock, name: str, since: str | None, latest: str, row: Row) -> list[Finding]:
    """The latest no longer fails the same way: where it passed first and/or failed differently first."""
    b = vr.bisect(name, since, latest)
    out = []
    for first in (b.first_changed, b.then_changed):
        # where the repro failed otherwise and the user's script passed there, the release passes
        verdict = b.judged(first)
        if verdict is None or verdict.kind is Kind.SAME:
            continue
        kind = PASSES if verdict.kind is Kind.PASS else DIFFERENT
        at = row if first == latest else vr.row(f"{name} {first}", {name: first})  # a cached environment
        out.append(Finding(name, kind, first, at.to_dict(), _lock_diff(lock, at),
                           detail="; ".join(x for x in (verdict.detail, b.sentence()) if x)))
    if not out:  # the bisection could not place it (releases that did not install): the latest says
        kind = PASSES if row.verdict.kind is Kind.PASS else DIFFERENT
        out.append(Finding(name, kind, latest, row.to_dict(), _lock_diff(lock, row), detail=b.sentence()))
    return out


def watch_marker(sig_id: str, finding: Finding) -> str:
    return MARKER.format(sig=sig_id, key=finding.key)


def comment_body(folder: ReproDir, sig_id: str, finding: Finding) -> str:
    row = finding.row
    pins = ", ".join(f"{k} {v}" for k, v in (row.get("versions") or {}).items())
    verdict = row.get("verdict") or {}
    outcome = verdict.get("kind", "") + (f": {verdict['detail']}" if verdict.get("detail") else "")
    lines = [f"**reprobot watch:** the repro from this issue {finding.sentence()}.", "",
             "| run | versions | outcome |", "|---|---|---|",
             f"| {row.get('label', '')} | {pins} | {outcome.replace('|', '/')} |", ""]
    if finding.detail:
        lines += [finding.detail, ""]
    if finding.lock_diff:
        lines += ["Against the lock the issue reported:", "", "```diff", *finding.lock_diff, "```", ""]
    lines += ["<sub>Posted once per finding by `reprobot watch`, which re-runs the repro on new releases.</sub>",
              "", watch_marker(sig_id, finding)]
    return "\n".join(lines) + "\n"


def _own_comment(issue: Any, login: str, mark: str) -> Any | None:
    from bot.issue.markdown import top_level_html
    for c in issue.get_comments():
        author = getattr(getattr(c, "user", None), "login", "") or ""
        if author.lower() == login.lower() and mark in top_level_html(c.body or ""):
            return c
    return None


def _issues(folder: ReproDir, only: str | None):
    from bot.issue.filing import read_filed
    return [i for i in read_filed(folder) if only is None or i.repo.lower() == only.lower()]


def post_findings(folder: ReproDir, state: WatchState, client: Any, login: str,
                  notify: Notify = lambda _: None, only: str | None = None) -> list[tuple[Finding, str, str]]:
    """ONE comment per finding on every issue filed from ``folder``; returns (finding, issue, status)."""
    from bot.issue.github import github_errors

    from bot.issue.filing import trusted_filed

    sig_id = folder.signature().id
    done = []
    for recorded in _issues(folder, only):
        # filed.json is a claim: commented on only once GitHub confirms the issue is the filing
        # account's own for this failure (a forged record must not aim the comments elsewhere)
        issue = trusted_filed(folder, recorded.repo, client, sig_id, notify)
        if issue is None:
            continue
        where = f"{issue.repo}#{issue.number}"
        for finding in state.findings:
            if where in finding.posted:
                continue
            mark = watch_marker(sig_id, finding)
            with github_errors(f"reading the comments of {where}"):
                gh_issue = client.get_repo(issue.repo).get_issue(issue.number)
                existing = _own_comment(gh_issue, login, mark)
            if existing is not None:
                status = "found"
                url = str(existing.html_url)
            else:
                with github_errors(f"commenting on {where}"):
                    url = str(gh_issue.create_comment(comment_body(folder, sig_id, finding)).html_url)
                status = "posted"
            finding.posted[where] = url
            state.save()
            notify(f"{where}: {finding.sentence()}: {status} {url}")
            done.append((finding, where, status))
    return done


def pending(folder: ReproDir, state: WatchState, only: str | None = None) -> list[tuple[Finding, str]]:
    return [(f, f"{i.repo}#{i.number}") for i in _issues(folder, only) for f in state.findings
            if f"{i.repo}#{i.number}" not in f.posted]
