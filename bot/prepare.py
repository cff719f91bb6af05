"""Everything `file` needs before it can show a preview, from whatever a repro folder holds.

Each missing step (routing, the environment, related issues, the draft) runs here, in the
pipeline's order; a step whose output is already in the folder is kept as it is. Each step
says in one line what it did or why it was skipped, so `reduce` followed by `file --dry-run`
is the whole workflow, and a user who ran the steps one by one loses nothing.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from bot.scrub import scrub, scrub_json
from bot.store import ReproDir, write_json_atomic
from reducer.errors import ReprobotError

# A likely duplicate, from dedup's parts (bot/upstream/dedup.py:score): the same normalised
# error message together with the same innermost library frame, or reprobot's own marker in
# the issue. A shared message alone is not enough ("Expected all tensors to be on the same
# device" names nothing), nor is a high BM25 score.
DUP_SCORE = 0.5


@dataclass(frozen=True)
class StepLine:
    step: str
    did: str        # "ran", "kept" (already in the folder) or "skipped"
    text: str

    def __str__(self) -> str:
        return f"{self.step}: {self.text}"


@dataclass
class FolderSteps:
    """What ``run_missing_steps`` found or ran: routing, related issues, one line per step."""
    route: dict[str, Any] | None = None
    related: dict[str, Any] | None = None
    lines: list[StepLine] = field(default_factory=list)

    @property
    def target(self) -> str | None:
        return str(self.route["target"]) if self.route and self.route.get("target") else None


# ---- the steps, each also behind its own command -------------------------------------------
def route_with_index(failure, *, db: str | Path | None = None, use_index: bool = True):
    """route(), with the issue index's nearest failures as evidence when an index exists (it is
    opened, never created: routing works the same with no index, minus that evidence)."""
    from bot.upstream.index import IssueIndex, default_db_path
    from bot.upstream.route import route
    path = Path(db) if db is not None else default_db_path()
    if not use_index:
        return route(failure)
    if path.is_file():
        with IssueIndex.open(path, create=False) as index:
            if index.count():
                return route(failure, index=index)
    with _bundled_index() as index:
        return route(failure, index=index)


@contextmanager
def _bundled_index() -> Iterator[Any]:
    """The known issues bundled with reprobot, in a throwaway index (for a user whose own index is
    empty or missing; `reprobot index seed` keeps them)."""
    import tempfile

    from bot.upstream.index import IssueIndex
    from bot.upstream.seed import seed
    with tempfile.TemporaryDirectory(prefix="reprobot-known-") as tmp, \
            IssueIndex.open(Path(tmp) / "known.sqlite3") as index:
        seed(index)
        yield index


def route_folder(repro: ReproDir, *, db: str | Path | None = None, use_index: bool = True,
                 python: str | None = None) -> dict[str, Any]:
    """Route the folder's failure and write route.json (what `reprobot route DIR` does). With
    ``python``, a folder without built.json runs its repro once first to learn which package made
    the tensors the failing line read (bot/rerun/built.py); ``data["built"]`` says what happened."""
    from bot.upstream.failure import failure_from_repro
    built = _built_step(repro, python)
    data = route_with_index(failure_from_repro(str(repro.path)), db=db, use_index=use_index).to_dict()
    data["source"] = "repro folder"
    data["built"] = built
    data = scrub_json(data)
    write_json_atomic(repro.route_json, data)
    return data


def _built_step(repro: ReproDir, python: str | None) -> str:
    from bot.rerun.built import run_built, write_built
    from bot.upstream.made import FILE
    if (repro.path / FILE).is_file():
        return "kept"
    if python is None or not repro.repro.is_file():
        return "not run"
    if not _uses_tensors(repro.repro.read_text(encoding="utf-8")):
        return "not run: the repro imports neither torch nor a package of the stack (no tensors to follow)"
    try:
        built = run_built(repro, python)
    except ReprobotError as e:
        return f"not run: {e}"
    if built is None:
        return "not recorded: the run did not fail with the signature's exception and message"
    write_built(repro, built)
    return "ran"


def _uses_tensors(source: str) -> bool:
    """The repro imports torch or a package of the stack: only then can a tensor be handed over (a
    run of anything else would only cost time, and a run of a flaky repro one more draw)."""
    from bot.upstream.route import repro_packages
    return bool(repro_packages(source, also=frozenset({"torch"})))


# A target repository synced longer ago than this is brought up to date before `dedup` ranks.
SYNC_EVERY_HOURS = 24.0


def related_for(failure, target: str | None, *, db: str | Path | None = None, api_url: str | None = None,
                search: bool = True, top: int = 5, sync: bool = False, anonymous_search: bool = False,
                progress: Callable[[Any], None] | None = None):
    """dedup against the local index, plus GitHub search when a token is set (and ``search``);
    with ``anonymous_search``, also without a token (GitHub allows a few a minute; only the
    scrubbed error phrase is sent). With ``sync`` and a token, the target repository's issues are
    fetched into the index first, incrementally; without a token the result says what it missed."""
    from bot.issue.github import TOKEN_ENV, github_client, token_from_env
    from bot.upstream.dedup import dedup
    from bot.upstream.index import IssueIndex
    token = token_from_env()
    client = None
    if search and (token or anonymous_search):
        # Search is an extra: a short timeout and one retry, so no network costs seconds, not minutes.
        client = github_client(api_url=api_url, max_wait=15, timeout=10, retries=1)
    notes: list[str] = []
    with IssueIndex.open(db) as index:
        if sync and target:
            if token:
                notes += _sync_target(index, target, api_url, progress)
            elif not index.last_sync(target):
                notes.append(f"{target}'s own issues were not fetched into the index: that needs a GitHub "
                             f"token (set {TOKEN_ENV}; read access to public repositories is enough)")
        if index.count():
            result = dedup(index, failure, target_repo=target, client=client, top=max(1, top))
            result.notes = notes
            return result
    # An empty index (a new user): the known issues bundled with reprobot.
    with _bundled_index() as index:
        result = dedup(index, failure, target_repo=target, client=client, top=max(1, top))
    result.index_source = "bundled"
    result.notes = notes
    return result


def _sync_target(index, target: str, api_url: str | None, progress) -> list[str]:
    """Bring the target's issues up to date when they never were, or not for a day; stopping
    (rate limit, network) keeps every committed page and says so: the next run continues."""
    from datetime import datetime, timezone
    from bot.issue.github import github_client
    from bot.upstream.index import sync
    synced = index.synced_at(target)
    if synced:
        age = datetime.now(timezone.utc) - datetime.strptime(synced, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        if age.total_seconds() < SYNC_EVERY_HOURS * 3600:
            return []
    before = index.count(target)
    try:
        stats = sync(index, target, client=github_client(api_url=api_url), progress=progress)
    except ReprobotError as e:
        return [f"sync of {target} stopped ({e.message}); {index.count(target) - before} issue(s) added, "
                "the next dedup continues from there"]
    if stats.not_modified:
        return [f"{target}: no issue updated since the last sync"]
    return [f"{target}: {stats.fetched} issue(s)/PR(s) fetched" + (f" since {stats.since}" if stats.since else "")
            + f"; {index.count(target)} indexed"]


def dedup_folder(repro: ReproDir, target: str | None, **kwargs: Any) -> dict[str, Any]:
    """Rank related issues for the folder's failure and write related.json (`reprobot dedup DIR`)."""
    from bot.upstream.failure import failure_from_repro
    data = related_for(failure_from_repro(str(repro.path)), target, **kwargs).to_dict()
    data = scrub_json(data)
    write_json_atomic(repro.related_json, data)
    return data


def index_is_empty(db: str | Path | None) -> bool:
    from bot.upstream.index import IssueIndex
    with IssueIndex.open(db) as index:
        return index.count() == 0


def likely_duplicate(related: dict[str, Any] | None, signature_id: str | None = None) -> dict[str, Any] | None:
    """dedup's top match when it is probably the same failure, else None."""
    results = (related or {}).get("results") or []
    if not results or not isinstance(results[0], dict):
        return None
    top = results[0]
    parts = top.get("components") or {}
    reason = str(top.get("reason") or "")
    if signature_id and f"sig={signature_id}" in reason:
        return top
    same_text = bool(parts.get("message") or parts.get("github_search"))
    innermost = "incl. the innermost" in reason
    if top.get("is_pr"):
        return None  # a PR is a fix to read, not a place to comment instead
    from bot.upstream.dedup import generic_message
    message = ((related or {}).get("query") or {}).get("message")
    if generic_message(message) and not innermost:
        # Stock wording that many unrelated bugs share: without the innermost frame agreeing,
        # however similar the rest, it is not called the same failure.
        return None
    probability = top.get("duplicate_probability")
    if probability is not None:
        from bot.upstream.calibration import model

        fitted = model()
        if fitted is not None:
            return top if float(probability) >= fitted.threshold else None
    # No fitted model (or a related.json written without one): the hand rule.
    if innermost and same_text:
        return top
    if same_text and float(top.get("score") or 0) >= DUP_SCORE and not generic_message(message):
        return top
    return None


def _chance(dup: dict[str, Any]) -> str:
    p = dup.get("duplicate_probability")
    return f"{float(p):.0%} likely the same by the calibrated model, " if p is not None else ""


def duplicate_line(dup: dict[str, Any]) -> str:
    short = f"{str(dup['repo']).split('/')[-1]}#{dup['number']}"
    fixed = f", likely fixed in {dup['likely_fixed_in']}" if dup.get("likely_fixed_in") else ""
    return (f"{short} ({dup.get('state', 'unknown')}{fixed}) looks like the same failure "
            f"({_chance(dup)}score {float(dup.get('score') or 0):.2f}: {dup.get('reason') or 'same error'}): "
            f"comment there instead? https://github.com/{dup['repo']}/issues/{dup['number']}")


# ---- the whole preparation ------------------------------------------------------------------
def run_missing_steps(repro: ReproDir, *, python: str | None = None, db: str | Path | None = None,
                      api_url: str | None = None, search: bool = True,
                      notify: Callable[[StepLine], None] | None = None) -> FolderSteps:
    """Run the steps the folder lacks before a preview (route, env, dedup), keep those it has;
    returns routing, related issues and one line per step."""
    out = FolderSteps()

    def say(step: str, did: str, text: str) -> None:
        line = StepLine(step, did, scrub(text).text)
        out.lines.append(line)
        if notify:
            notify(line)

    if repro.route_json.is_file():
        out.route = _read(repro, repro.route_json)
        say("route", "kept", _route_text(out.route) + " (route.json)")
    else:
        out.route = route_folder(repro, db=db, python=python)
        say("route", "ran", _route_text(out.route))

    if repro.env_json.is_file():
        say("environment", "kept", "env.json" + (" and requirements.lock" if repro.requirements_lock.is_file()
                                                 else "; no requirements.lock"))
    elif python is None:
        say("environment", "skipped", "env.json is missing; run `reprobot env` with the script's interpreter")
    else:
        say("environment", "ran", _capture_env(repro, python))

    out.related = _read(repro, repro.related_json) if repro.related_json.is_file() else None
    from bot.issue.github import token_from_env
    empty = index_is_empty(db)
    token = bool(token_from_env())
    stale = out.related is not None and not (out.related.get("github_search") or {}).get("used") and (
        out.related.get("index_source") == "bundled" or not out.related.get("indexed_issues"))
    if out.related is not None and not (stale and (not empty or (search and token))):
        say("related issues", "kept", _related_text(out.related) + " (related.json)")
    else:
        try:
            out.related = dedup_folder(repro, out.target, db=db, api_url=api_url, search=search)
        except ReprobotError as e:
            say("related issues", "skipped", f"not searched: {e.message}")
        else:
            text = _related_text(out.related)
            if out.related.get("index_source") == "bundled":
                from bot.targets import get_target
                key = get_target(out.target).key if out.target else "KEY"
                text += ("; your issue index is empty: `reprobot index seed` keeps these offline, `reprobot index "
                         f"sync --repo {key}` adds the rest (needs GITHUB_TOKEN)")
            if token and not search:
                text += "; GitHub search runs once the draft has passed its checks"
            say("related issues", "ran", text)
    return out


def search_related(repro: ReproDir, prep: FolderSteps, *, db: str | Path | None = None,
                   api_url: str | None = None) -> StepLine | None:
    """Before filing: GitHub search for the error text, when a token is set and related.json
    does not already include a search. Updates ``prep.related``; None when nothing was done."""
    from bot.issue.github import token_from_env
    if not token_from_env() or (prep.related and (prep.related.get("github_search") or {}).get("used")):
        return None
    try:
        prep.related = dedup_folder(repro, prep.target, db=db, api_url=api_url, search=True)
    except ReprobotError as e:
        return StepLine("related issues", "skipped", scrub(f"GitHub search failed: {e.message}").text)
    line = StepLine("related issues", "ran", scrub(_related_text(prep.related)).text)
    prep.lines.append(line)
    return line


def _read(repro: ReproDir, path: Path) -> dict[str, Any]:
    data = repro.read_json(path)
    if not isinstance(data, dict):
        from reducer.errors import ExitCode
        raise ReprobotError(f"{path}: expected a JSON object, found {type(data).__name__}", ExitCode.BAD_INPUT)
    return data


def _route_text(route: dict[str, Any]) -> str:
    return str(route.get("verdict") or (route.get("target") or "no repository named"))


def _related_text(related: dict[str, Any]) -> str:
    results = related.get("results") or []
    where = (f"{related.get('indexed_issues', 0)} known issues bundled with reprobot"
             if related.get("index_source") == "bundled" else f"{related.get('indexed_issues', 0)} indexed") + (
        " + GitHub search" if (related.get("github_search") or {}).get("used") else "")
    if not results:
        return f"none found ({where})"
    top = results[0]
    return (f"{len(results)} found ({where}); best: {str(top.get('repo', '')).split('/')[-1]}#{top.get('number')} "
            f"({float(top.get('score') or 0):.2f})")


def _capture_env(repro: ReproDir, python: str) -> str:
    from bot.env.lockfile import write_lock
    from bot.env.probe import write_env
    try:
        write_env(repro, python)
    except ReprobotError as e:
        return f"not captured: {e.message}"
    try:
        write_lock(repro, python, None)
    except ReprobotError as e:
        return f"env.json written; requirements.lock not written: {e.message}"
    return "env.json and requirements.lock written from this interpreter"
