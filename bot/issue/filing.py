"""Filing a draft on GitHub, once.

Idempotency has three layers, because a POST that times out or gets a 502 may still have
created the issue:
1. ``filed.json`` in the repro folder records every issue filed (or found) for it; a second
   submit answers "already filed: <url>" without touching the network.
2. The body carries a hidden marker ``<!-- reprobot:sig=<id> -->``; before creating, GitHub is
   asked for an issue holding it (search, plus the filer's own recent issues, which unlike
   search are not subject to indexing lag). Only an issue the filing identity itself wrote,
   with the marker as the body's own hidden comment, counts: anyone can write the marker into
   an issue, and an issue by someone else must not stop the filing.
3. The POST is sent exactly once (bot/issue/github.py's write client never retries a POST). When it
   fails, only the safe GETs of step 2 are repeated to learn whether it landed.
Labels and assignees are never sent: upstream drops them for non-maintainers.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Collection

from github import BadCredentialsException, Github, GithubException

from bot.issue.draft import (MARKER_PREFIX, Draft, build_draft, carries_marker, edited_by_hand, load_draft, marker,
                             newer_inputs, script_placeholders, write_draft)
from bot.issue.forms import field_values, get_form
from bot.scrub import Finding, find_secrets, scrub, uncertain_strings
from bot.store import ReproDir, rerun_notes, write_json_atomic
from reducer.errors import ExitCode, ReprobotError

# reprobot's own editing aids in a draft (notes, "confirm this" prompts): not for upstream.
_OWN_COMMENTS = re.compile(r"<!-- reprobot:(?:notes|confirm|missing)\b.*?-->[ \t]*\n?", re.DOTALL)
RECENT = timedelta(days=2)  # how far back the filer's own issues are checked for the marker
RECENT_ANYONE = 300         # issues read when the listing cannot filter by author (a busy repository gets ~100 a day)
FILER_ENV = "REPROBOT_FILER_LOGIN"  # who files, when the token cannot say (see filer_login)


@dataclass(frozen=True)
class FiledIssue:
    repo: str
    number: int
    url: str
    signature_id: str
    title: str
    filed_at: str
    created: bool  # False: an issue with the marker already existed and was adopted

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "number": self.number, "url": self.url, "signature_id": self.signature_id,
                "title": self.title, "filed_at": self.filed_at, "created": self.created}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FiledIssue":
        return cls(str(d["repo"]), int(d["number"]), str(d["url"]), str(d.get("signature_id", "")),
                   str(d.get("title", "")), str(d.get("filed_at", "")), bool(d.get("created", True)))


@dataclass(frozen=True)
class SubmitResult:
    issue: FiledIssue
    status: str  # "created" | "already-filed" | "found-existing" | "created-despite-error"

    @property
    def message(self) -> str:
        if self.status == "created":
            return f"filed: {self.issue.url}"
        if self.status == "created-despite-error":
            return f"filed (GitHub reported an error, but the issue exists): {self.issue.url}"
        return f"already filed: {self.issue.url}"


def submission_body(draft: Draft) -> str:
    """The body as sent: reprobot's editing comments removed, the signature marker kept (and
    put back if a person deleted it while editing)."""
    body = _OWN_COMMENTS.sub("", draft.body).lstrip("\n")
    if not carries_marker(body, draft.signature_id):
        body = body.rstrip("\n") + "\n\n" + marker(draft.signature_id) + "\n"
    return body


def check_safe(title: str, body: str) -> None:
    """Fail closed: refuse to send anything in which a secret pattern survives."""
    problem = _sent_secret(title, body)
    if problem is not None:
        raise ReprobotError(problem.refusal, problem.exit_code)


def _sent_secret(title: str, body: str) -> "Problem | None":
    found = find_secrets(title + "\n" + body)
    if not found:
        return None
    first = found[0]
    where = "title" if first.line == 1 else f"body line {first.line - 1}"
    return Problem("secret", f"refusing to file: {first.kind} {first.preview} in the {where} "
                   f"({len(found)} secret pattern{'s' if len(found) > 1 else ''}); remove it from the "
                   "draft or re-run `reprobot draft`", ExitCode.UNSAFE,
                   f"--submit would refuse: {len(found)} secret pattern(s) in what would be sent")


def draft_for_filing(repro: ReproDir, key: str,
                     notify: Callable[[str], None] = lambda _: None) -> tuple[Draft, list[Finding], list[Finding]]:
    """The draft to show or file: the stored one (a person may have edited it) or a fresh one,
    built and written when the stored one is missing or older than its inputs (and not edited).
    Returns (the draft with private details scrubbed again, what that scrub found now, secrets
    in the stored text); ``notify`` gets one line saying which draft it is."""
    stored = repro.draft_md(key).is_file() and repro.draft_json(key).is_file()
    newer = newer_inputs(repro, key) if stored else []
    if stored and (not newer or edited_by_hand(repro, key)):
        draft = load_draft(repro.path, key)
        if newer:
            notify(f"draft: {repro.draft_md(key).name} (kept: edited by hand; newer than it: {', '.join(newer)} — "
                   f"`reprobot draft --force` rebuilds it, then carry your edits over)")
        else:
            notify(f"draft: {repro.draft_md(key).name} (kept; `reprobot draft --force` writes it again)")
    else:
        draft = build_draft(repro.path, key)
        md, _ = write_draft(repro.path, draft)
        notify(f"draft: {md.name} " + (f"rebuilt (newer: {', '.join(newer)})" if newer else "written"))
    again = scrub(draft.body)
    title = scrub(draft.title)
    secrets = title.secrets + again.secrets
    fresh = replace(draft, body=again.text, title=title.text, fields=field_values(get_form(key), again.text))
    return fresh, title.findings + again.findings, secrets


@dataclass(frozen=True)
class Problem:
    """One reason `file --submit` will not file a draft. The rule lives here once: `--dry-run`
    shows ``preview``, `--submit` raises ``refusal`` with ``exit_code``."""
    rule: str              # "secret", "placeholder", "invalid", "not-a-bug", "uncertain"
    refusal: str           # the one-line error --submit stops with
    exit_code: int
    preview: str           # what --dry-run says (plain text, one or more lines)
    waiver: str | None = None   # the flag that files it anyway ("--anyway", "--not-a-secret")
    asks: bool = False     # without --yes a person is asked instead of refused

    def blocks(self, waived: Collection[str], yes: bool) -> bool:
        """Whether --submit stops here, given the waiver flags passed and whether it may ask."""
        if self.waiver is not None and self.waiver in waived:
            return False
        return yes or not self.asks


def uncertain_in(title: str, body: str) -> list[tuple[str, Finding]]:
    """(where, finding) for each bare random-looking string in what would be filed."""
    found = uncertain_strings(title + "\n" + body)
    return [("title" if f.line == 1 else f"body line {f.line - 1}", f) for f in found]


def preflight(repro: ReproDir, draft: Draft, key: str, stored_secrets: list[Finding]) -> list[Problem]:
    """Everything that stops `file --submit` before anything is sent, in the order it is checked:
    what is unsafe or incomplete first, then what a maintainer would close (a usage error or an
    environment problem), then what a person must confirm. ``draft`` is the scrubbed draft and
    ``stored_secrets`` the secrets of its stored text (both from ``draft_for_filing``)."""
    from bot.upstream.kind import classify_repro, kind_line

    problems: list[Problem] = []
    md = repro.draft_md(key).name
    form = get_form(key)
    if stored_secrets:
        first = stored_secrets[0]
        problems.append(Problem("secret", f"refusing to file: {first.kind} {first.preview} at line {first.line} of "
                                f"{md}; remove it, or re-run `reprobot draft`", ExitCode.UNSAFE,
                                f"--submit would refuse: {len(stored_secrets)} secret pattern(s) in the stored draft"))
    for line, placeholder in script_placeholders(draft.body):
        problems.append(Problem("placeholder", f"refusing to file: line {line} of the script in {md} holds "
                                f"{placeholder} where a private value was removed; put a stand-in value there that "
                                "still fails the same way", ExitCode.UNSAFE,
                                f"needs you: line {line} of the script in the draft holds {placeholder} where a "
                                "private value was removed; put a stand-in value there that still fails the same "
                                f"way (edit {md}); --submit refuses until then"))
    check = draft.validate()
    if not check.ok:
        problems.append(Problem("invalid", f"{md} does not fill the {form.repo} form: "
                                + "; ".join(map(str, check.problems)), ExitCode.BAD_INPUT,
                                "\n".join(f"invalid: {p}" for p in check.problems)))
    body = submission_body(draft)
    sent = _sent_secret(draft.title, body)
    if sent is not None and not stored_secrets:
        problems.append(sent)
    kind = classify_repro(repro)
    if kind is not None and kind.kind != "bug":
        line = kind_line(kind, rerun_notes(repro).works_with)
        problems.append(Problem("not-a-bug", f"not filed: {line} Pass --anyway to file it as a bug report all the "
                                "same", ExitCode.USAGE, line + "\n--submit refuses unless --anyway is given",
                                waiver="--anyway"))
    for where, f in uncertain_in(draft.title, body):
        problems.append(Problem("uncertain", f"not filed: the {where} holds a string that may be a credential "
                                f"({f.preview}); remove it from the draft, or pass --not-a-secret if it is an id",
                                ExitCode.UNSAFE,
                                f"check: the {where} holds a string that may be a credential or an id "
                                f"({f.preview}): --submit asks before filing it (with --yes, refuses without "
                                "--not-a-secret)", waiver="--not-a-secret", asks=True))
    return problems


def read_filed(repro: ReproDir) -> list[FiledIssue]:
    if not repro.filed_json.is_file():
        return []
    data = repro.read_json(repro.filed_json)
    return [FiledIssue.from_dict(d) for d in (data.get("issues") or [])]


def already_filed(repro: ReproDir, repo: str) -> FiledIssue | None:
    for issue in read_filed(repro):
        if issue.repo.lower() == repo.lower():
            return issue
    return None


def _record(repro: ReproDir, issue: FiledIssue) -> None:
    issues = [i for i in read_filed(repro) if i.repo.lower() != issue.repo.lower()] + [issue]
    write_json_atomic(repro.filed_json, {"issues": [i.to_dict() for i in issues]})


def filer_login(client: Github) -> str:
    """The login issues filed with this client are authored by: ``GET /user`` for a person's
    token; GraphQL ``viewer`` for a GitHub App installation token (``/user`` answers 403 to
    those, ``viewer`` answers ``<app-slug>[bot]``); else ``$REPROBOT_FILER_LOGIN``. Without it
    no issue can be recognised as ours, so this raises rather than guess."""
    import os

    from bot.issue.github import graphql

    try:
        return str(client.get_user().login)
    except GithubException as e:
        if isinstance(e, BadCredentialsException):
            raise
    try:
        login = (graphql("query { viewer { login } }", client=client).get("viewer") or {}).get("login")
    except ReprobotError:
        login = None
    login = login or os.environ.get(FILER_ENV, "").strip()
    if not login:
        raise ReprobotError("could not tell which GitHub account is filing (neither /user nor GraphQL viewer "
                            f"answered): set {FILER_ENV} to its login; nothing was filed", ExitCode.NETWORK)
    return str(login)


def _ours(item: Any, login: str, sig_id: str) -> bool:
    author = getattr(getattr(item, "user", None), "login", None) or ""
    return author.lower() == login.lower() and carries_marker(item.body, sig_id)


def find_marked(client: Github, repo: str, sig_id: str) -> Any | None:
    """An issue in ``repo`` that the filing identity wrote with this signature's marker, or None.

    Search first (finds it however old); then the repository's issues updated in the last days,
    read directly, since search can lag behind a create by a minute or more. "Could not check"
    is never "not found": when the listing cannot be read this raises, and nothing is filed.
    """
    from bot.issue.github import search_throttle

    login = filer_login(client)
    searched = True
    try:
        search_throttle(client).acquire()
        query = f'repo:{repo} is:issue in:body "{MARKER_PREFIX[5:]}{sig_id}"'
        # islice, not [:30]: PyGithub's slice of an empty result raises IndexError.
        for item in itertools.islice(client.search_issues(query), 30):
            if _ours(item, login, sig_id):
                return item
    except BadCredentialsException:
        raise
    except GithubException:
        searched = False  # the direct listing below still decides
    since = datetime.now(timezone.utc) - RECENT
    # The REST ``creator`` filter takes a user's login; an App's ``name[bot]`` is filtered here.
    by_creator = not login.endswith("[bot]")
    try:
        gh_repo = client.get_repo(repo)
        listing = (gh_repo.get_issues(state="all", creator=login, since=since) if by_creator  # type: ignore[arg-type]
                   else gh_repo.get_issues(state="all", since=since))
        for item in itertools.islice(listing, 100 if by_creator else RECENT_ANYONE):
            if item.pull_request is None and _ours(item, login, sig_id):
                return item
    except GithubException as e:
        raise ReprobotError(f"could not check {repo} for an issue already filed for this failure "
                            f"(GitHub answered {e.status}{'' if searched else ', and search failed too'}); "
                            "nothing was filed", ExitCode.NETWORK) from None
    return None


class FilingLock:
    """One `file --submit` at a time per repro folder: a second one waits for nothing, it says so.
    Re-entrant within a process: `file --submit` holds it from its first write to the folder
    (route, env, the draft) to the end, and ``submit`` takes it again around the POST."""

    _held: dict[Path, int] = {}

    def __init__(self, repro: ReproDir) -> None:
        self.path = (repro.path / ".filing.lock").resolve()
        self._fd: int | None = None

    def __enter__(self) -> "FilingLock":
        import fcntl
        import os
        if self.path in FilingLock._held:
            FilingLock._held[self.path] += 1
            return self
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            raise ReprobotError(f"another `reprobot file --submit` is filing from {self.path.parent.name} now; "
                                "run it again when that one has finished", ExitCode.BUSY) from None
        FilingLock._held[self.path] = 1
        return self

    def __exit__(self, *exc: object) -> None:
        import fcntl
        import os
        FilingLock._held[self.path] -= 1
        if FilingLock._held[self.path]:
            return
        del FilingLock._held[self.path]
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _filed(repo: str, item: Any, draft: Draft, created: bool) -> FiledIssue:
    return FiledIssue(repo, int(item.number), str(item.html_url), draft.signature_id, str(item.title),
                      datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), created)


def submit(repro: ReproDir, draft: Draft, client: Github) -> SubmitResult:
    """File ``draft`` on GitHub unless it is already there; record the URL in filed.json."""
    with FilingLock(repro):
        return _submit(repro, draft, client)


def _submit(repro: ReproDir, draft: Draft, client: Github) -> SubmitResult:
    from bot.issue.github import github_errors

    prior = already_filed(repro, draft.repo)
    if prior is not None:
        return SubmitResult(prior, "already-filed")
    body = submission_body(draft)
    check_safe(draft.title, body)
    with github_errors(f"checking {draft.repo} for an issue already filed"):
        existing = find_marked(client, draft.repo, draft.signature_id)
    if existing is not None:
        issue = _filed(draft.repo, existing, draft, created=False)
        _record(repro, issue)
        return SubmitResult(issue, "found-existing")
    try:
        with github_errors(f"filing on {draft.repo}"):
            # Title and body only: no labels, no assignees. Sent once, never retried.
            created = client.get_repo(draft.repo).create_issue(title=draft.title, body=body)
    except ReprobotError as e:
        if e.exit_code != ExitCode.NETWORK:
            raise
        # The POST may have landed before the error: look (GETs only), never send it again.
        try:
            with github_errors("checking whether the issue was created"):
                landed = find_marked(client, draft.repo, draft.signature_id)
        except ReprobotError:
            landed = None
        if landed is not None:
            issue = _filed(draft.repo, landed, draft, created=True)
            _record(repro, issue)
            return SubmitResult(issue, "created-despite-error")
        raise ReprobotError(f"{e.message}; the request was not re-sent. The issue may still appear: run the same "
                            f"`reprobot file --submit` later, it looks for the marker before filing",
                            ExitCode.NETWORK) from None
    issue = _filed(draft.repo, created, draft, created=True)
    _record(repro, issue)
    return SubmitResult(issue, "created")
