"""Filing a draft on GitHub, once.

Idempotency has three layers, because a POST that times out or gets a 502 may still have
created the issue:
1. ``filed.json`` in the repro folder records every issue filed (or found) for it; a second
   submit answers "already filed: <url>" once that issue is read back from the configured
   GitHub: an issue of the target repository (same owner/name, on the host GitHub names for
   it), the filing identity's own, with this failure's marker. Anything else in filed.json is
   ignored with a line saying why (a folder can come from anywhere: a forged record must
   neither stop the filing nor put its URL on the screen as ours).
2. The body carries a hidden marker ``<!-- reprobot:sig=<id> -->``; before creating, GitHub is
   asked for an issue holding it (search, plus the filer's own recent issues, which unlike
   search are not subject to indexing lag). Only an issue the filing identity itself wrote,
   with the marker as the body's own hidden comment, counts: anyone can write the marker into
   an issue, and an issue by someone else must not stop the filing.
3. The POST is sent exactly once (bot/github_api.py's write client never retries a POST). When it
   fails, only the safe GETs of step 2 are repeated to learn whether it landed.
Labels and assignees are never sent: upstream drops them for non-maintainers.
"""
from __future__ import annotations

import itertools
import re
import urllib.parse
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Collection

from github import BadCredentialsException, Github, GithubException, UnknownObjectException

from bot.issue.draft import (MARKER_PREFIX, Draft, body_script, build_draft, carries_marker, edited_by_hand, load_draft,
                             marker, newer_inputs, script_placeholders, with_warning, write_draft)
from bot.issue.hazards import find_hazards, hazard_context, plain_lines, summary
from bot.issue.forms import Validation, field_values, get_form
from bot.scrub import Finding, find_secrets, scrub, strip_controls, uncertain_strings
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
    # A script with hazards is never sent without its warning, even when an edit removed it.
    return with_warning(body, hazard_context(find_hazards(body_script(body) or ""), None))


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
    rule: str              # "secret", "placeholder", "hazard", "invalid", "not-a-bug", "uncertain"
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


@dataclass(frozen=True)
class Preflight:
    """What ``preflight`` checked, kept for the preview: the body as it would be sent and the
    form's verdict on it are built once, here, and shown as they were checked."""
    problems: list[Problem]
    body: str
    check: Validation


def preflight(repro: ReproDir, draft: Draft, key: str, stored_secrets: list[Finding]) -> Preflight:
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
    hazards = find_hazards(body_script(draft.body) or "")
    if hazards:
        said = summary(hazards)
        try:
            red = repro.read_json(repro.reduction_json) if repro.repro.is_file() and repro.reduction_json.is_file() else {}
        except ReprobotError:
            red = {}
        done = isinstance(red, dict) and red.get("status") == "done"
        why = "the failure needs these lines" if done else "the script was not fully reduced"
        problems.append(Problem("hazard", f"not filed: the repro {said}; {why}, and a maintainer should not run "
                                "them blind. Read them, then pass --anyway to file it with its warning",
                                ExitCode.UNSAFE,
                                f"Do not run this repro blind: it {said}.\n"
                                + "".join(f"  {line}\n" for line in plain_lines(hazards))
                                + "--submit refuses unless --anyway is given (the issue then opens with the warning)",
                                waiver="--anyway"))
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
    return Preflight(problems, body, check)


def read_filed(repro: ReproDir) -> list[FiledIssue]:
    """The folder's filed.json entries that are well-formed (anything else in it is skipped:
    a record is a claim to check against GitHub, never an instruction)."""
    if not repro.filed_json.is_file():
        return []
    try:
        data = repro.read_json(repro.filed_json)
    except ReprobotError:
        return []
    out = []
    for d in (data.get("issues") if isinstance(data, dict) else None) or []:
        try:
            out.append(FiledIssue.from_dict(d))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out


def already_filed(repro: ReproDir, repo: str) -> FiledIssue | None:
    """filed.json's entry for ``repo`` as written, unchecked: ``filed_entry`` and ``confirm_filed``
    decide whether to believe it."""
    for issue in read_filed(repro):
        if issue.repo.lower() == repo.lower():
            return issue
    return None


def filed_entry(repro: ReproDir, repo: str) -> tuple[FiledIssue | None, str | None]:
    """filed.json's entry for ``repo`` when its URL is an issue of that repository (same
    owner/name and number, https, nothing else in it): (entry, None); otherwise (None, why it is
    ignored), or (None, None) when there is no entry. No network: ``confirm_filed`` reads it back."""
    if repro.filed_json.is_file() and not read_filed(repro):
        return None, "filed.json holds no readable record"
    entry = already_filed(repro, repo)
    if entry is None:
        return None, None
    try:
        url = urllib.parse.urlsplit(entry.url)
        port = url.port
    except ValueError:
        return None, "its URL does not parse"
    host = strip_controls(url.hostname or "?")[:80]
    path = url.path.rstrip("/").split("/")
    if (url.scheme != "https" or url.username or url.password or port or url.query or url.fragment
            or len(path) != 5 or path[3] != "issues" or path[4] != str(entry.number)):
        return None, f"its URL on {host} is not an issue link"
    if f"{path[1]}/{path[2]}".lower() != repo.lower():
        return None, f"its URL names {strip_controls(path[1])[:40]}/{strip_controls(path[2])[:60]}, not {repo}"
    return entry, None


def confirm_filed(entry: FiledIssue, client: Github, sig_id: str) -> tuple[FiledIssue | None, str | None]:
    """Read ``entry``'s issue back from the configured GitHub: believed only when it is on the
    host that GitHub names for the repository, is an issue (not a pull request), and is the
    filing identity's own with this failure's marker (as ``find_marked`` decides). Returns the
    issue as GitHub describes it, or (None, why it is ignored)."""
    from bot.github_api import github_errors

    with github_errors(f"reading back {entry.repo}#{entry.number} from filed.json"):
        gh_repo = client.get_repo(entry.repo)
        expected = f"{str(gh_repo.html_url).rstrip('/')}/issues/{entry.number}"
        if entry.url.lower() != expected.lower():
            host = strip_controls(urllib.parse.urlsplit(entry.url).hostname or "?")[:80]
            return None, f"its URL is on {host}, not where GitHub has {entry.repo} ({expected})"
        try:
            item = gh_repo.get_issue(entry.number)
            number = int(item.number)
        except UnknownObjectException:
            return None, f"{entry.repo}#{entry.number} does not exist"
        login = filer_login(client)
    if item.pull_request is not None or str(item.html_url).lower() != expected.lower():
        return None, f"{entry.repo}#{entry.number} is not an issue"
    if not _ours(item, login, sig_id):
        return None, f"{entry.repo}#{number} was not filed by {login} for this failure (no marker of its own)"
    return FiledIssue(entry.repo, number, str(item.html_url), sig_id, str(item.title), entry.filed_at,
                      entry.created), None


def trusted_filed(repro: ReproDir, repo: str, client: Github, sig_id: str,
                  notify: Callable[[str], None] = lambda _: None) -> FiledIssue | None:
    """The issue filed.json records for ``repo``, once GitHub confirms it; else None, and
    ``notify`` gets one line saying why the record was ignored."""
    entry, why = filed_entry(repro, repo)
    if entry is not None:
        entry, why = confirm_filed(entry, client, sig_id)
    if why is not None:
        notify(f"filed.json ignored: {why}")
    return entry


def _record(repro: ReproDir, issue: FiledIssue) -> None:
    issues = [i for i in read_filed(repro) if i.repo.lower() != issue.repo.lower()] + [issue]
    write_json_atomic(repro.filed_json, {"issues": [i.to_dict() for i in issues]})


def filer_login(client: Github) -> str:
    """The login issues filed with this client are authored by: ``GET /user`` for a person's
    token; GraphQL ``viewer`` for a GitHub App installation token (``/user`` answers 403 to
    those, ``viewer`` answers ``<app-slug>[bot]``); else ``$REPROBOT_FILER_LOGIN``. Without it
    no issue can be recognised as ours, so this raises rather than guess."""
    import os

    from bot.github_api import graphql

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
    from bot.github_api import search_throttle

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


def submit(repro: ReproDir, draft: Draft, client: Github,
           notify: Callable[[str], None] = lambda _: None) -> SubmitResult:
    """File ``draft`` on GitHub unless it is already there (filed.json, once GitHub confirms it,
    or an issue of ours with the marker); record the URL in filed.json."""
    with FilingLock(repro):
        return _submit(repro, draft, client, notify)


def _submit(repro: ReproDir, draft: Draft, client: Github, notify: Callable[[str], None]) -> SubmitResult:
    from bot.github_api import github_errors

    prior = trusted_filed(repro, draft.repo, client, draft.signature_id, notify)
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
