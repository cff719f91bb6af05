"""Dedup: the upstream issues already filed about this failure, best first.

Each candidate from the local index (and, with a token and network, from GitHub's issue
search for the exact error text) is scored by combining:

* the same normalised message (weighted down when many issues share it: "Expected all
  tensors to be on the same device" alone says little);
* overlap of library frames, innermost frames weighing most (what tells two generic
  messages apart);
* BM25 (FTS5 ``bm25()``) of the error text against title and body;
* the same repository as the routing target; the same package versions;
* a hit in GitHub's own search.

Closed issues whose thread names a fixing PR or a release newer than the user's version get
"likely fixed in X". Nothing is ever labelled or closed on GitHub: this module only reads.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.upstream.index import IndexedIssue, IssueIndex, issue_row, normalized
from bot.upstream.failure import FailureReport, unmangle
from bot.targets import stack_packages, target_for_repo, targets
from reducer.errors import ReprobotError
from reducer.failure.signature import library_frames

TOP_N = 5
MIN_SCORE = 0.12
W_MESSAGE = 0.45
W_MESSAGE_IN_TEXT = 0.3
W_FRAMES = 0.3
W_BM25 = 0.2
W_SAME_REPO = 0.05
W_VERSION = 0.05
W_SEARCH = 0.1
QUERY_FRAMES = 8


@dataclass
class Query:
    exc_type: str
    message: str            # raw first line(s)
    norm: str               # normalised like the index
    frames: list[str]       # library frames, innermost first
    target_repo: str | None = None
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """What BM25 reads: the error and the innermost frames' names."""
        funcs = " ".join(f.rsplit(":", 1)[-1] + " " + f.rsplit("/", 1)[-1].split(".py")[0]
                         for f in self.frames[:4])
        return f"{self.exc_type.rsplit('.', 1)[-1]} {self.message} {funcs}"


# Python's and torch's stock wording for errors that many unrelated bugs raise: the same text
# alone does not make two reports the same failure (their frames have to agree too).
_GENERIC_MESSAGE = re.compile(
    r"'NoneType' object (?:is not (?:subscriptable|iterable|callable)|cannot be interpreted as an integer"
    r"|has no attribute '(?:shape|device|dtype|size|to|cpu|numel|decode|encode|get|keys|items)')"
    r"|maximum recursion depth exceeded|(?:integer )?division (?:or modulo )?by zero"
    r"|(?:list |tuple )?index out of range|'[<>]=?' not supported between instances of"
    r"|Expected all tensors to be on the same device|out of memory|device-side assert triggered"
    r"|element 0 of tensors does not require grad|expected scalar type \w+ but found \w+"
    r"|mat1 and mat2 shapes cannot be multiplied", re.IGNORECASE)


def generic_message(message: str | None) -> bool:
    """True for a message whose words many different bugs share (see _GENERIC_MESSAGE)."""
    return bool(message and _GENERIC_MESSAGE.search(message))


def query_of(failure: FailureReport, target_repo: str | None = None) -> Query:
    rec = failure.record
    frames = []
    for f in library_frames(rec):
        rel, func = f.rsplit(":", 1)
        rel2, _ = unmangle(rel, None)
        frames.append(f"{rel2}:{func}")
    message = (rec.message or "").strip()
    return Query(rec.exc_type, message[:2000], normalized(message), frames[:QUERY_FRAMES], target_repo,
                 dict(failure.versions))


@dataclass
class Related:
    repo: str
    number: int
    title: str
    url: str
    state: str
    score: float
    reason: str
    likely_fixed_in: str | None
    is_pr: bool
    components: dict[str, float] = field(default_factory=dict)
    innermost: bool = False               # the query's innermost library frame is in the issue
    probability: float | None = None      # of being the same failure (calibration.py), when fitted

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "number": self.number, "title": self.title, "url": self.url,
                "state": self.state, "score": round(self.score, 3), "reason": self.reason,
                "likely_fixed_in": self.likely_fixed_in, "is_pr": self.is_pr,
                "components": {k: round(v, 3) for k, v in self.components.items()},
                "duplicate_probability": self.probability}


def _version_tuple(v: str) -> tuple[Any, ...] | None:
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging ships with pip-tools
        return None
    try:
        return (Version(v),)
    except InvalidVersion:
        return None


def _package_of_repo(repo: str) -> str:
    target = target_for_repo(repo)
    return target.packages[0] if target else repo.split("/")[-1]


def fix_info(index: IssueIndex | None, issue: IndexedIssue, user_versions: dict[str, str]) -> tuple[str | None, str]:
    """(likely_fixed_in, note). A closed issue whose thread names a release newer than the
    user's version (or a fixing PR) is likely fixed there; a merged PR is its own fix."""
    if issue.is_pr:
        return (issue.ref, "merged PR") if issue.merged else (None, "")
    if issue.state != "closed" or issue.state_reason == "not_planned":
        return None, ""
    note = ""
    for pkg, ver in issue.fixed_in:
        pkg = pkg or _package_of_repo(issue.repo)
        have = user_versions.get(pkg)
        fixed_t, have_t = _version_tuple(ver), _version_tuple(have) if have else None
        if fixed_t and have_t and have_t >= fixed_t:
            note = f"fixed in {pkg} {ver} but you have {have}: a regression or another bug"
            continue
        return f"{pkg} {ver}", (f"you have {pkg} {have}" if have else "")
    refs = list(issue.fixed_by)
    if index is not None:
        refs += [pr.ref for pr in index.prs_fixing(issue.ref) if pr.merged or pr.state == "closed"]
    if refs and not note:
        return refs[0], "the thread names the fixing PR"
    return None, note


def _frame_overlap(query: list[str], issue_frames: Iterable[str]) -> tuple[float, int]:
    """Weighted share of the query's frames found in the issue; innermost weigh most."""
    have = set(issue_frames)
    if not query or not have:
        return 0.0, 0
    weights = [1.0 / (1.0 + 0.5 * d) for d in range(len(query))]
    hit = [w for f, w in zip(query, weights, strict=True) if f in have]
    return sum(hit) / sum(weights), len(hit)


def _versions_overlap(user: dict[str, str], issue: dict[str, str]) -> str | None:
    for pkg, ver in issue.items():
        have = user.get(pkg)
        if have and ver.split(".")[:2] == have.split(".")[:2]:
            return f"{pkg} {'.'.join(ver.split('.')[:2])}"
    return None


def score(query: Query, issue: IndexedIssue, *, bm25: float = 0.0, bm25_best: float = 0.0,
          share: int = 1, searched: bool = False) -> tuple[float, list[str], dict[str, float]]:
    """The combined score of one candidate, its reasons and the parts it was built from."""
    parts: dict[str, float] = {}
    reasons: list[str] = []
    same_type = not issue.exc_type or issue.exc_type.rsplit(".", 1)[-1] == query.exc_type.rsplit(".", 1)[-1]
    if query.norm and issue.message and issue.message == query.norm:
        w = W_MESSAGE / math.sqrt(max(share, 1)) * (1.0 if same_type else 0.5)
        parts["message"] = w
        reasons.append("same error message" + (f" (shared by {share} indexed issues)" if share > 2 else ""))
    elif len(query.norm) >= 20 and query.norm.lower() in normalized(f"{issue.title}\n{issue.body}").lower():
        parts["message_in_text"] = W_MESSAGE_IN_TEXT / math.sqrt(max(share, 1))
        reasons.append("the error text appears in the issue")
    overlap, n = _frame_overlap(query.frames, issue.frames)
    if n:
        parts["frames"] = W_FRAMES * overlap
        innermost = query.frames[0] in issue.frames
        reasons.append(f"{n}/{len(query.frames)} library frames match"
                       + (f" incl. the innermost ({query.frames[0]})" if innermost else ""))
    if bm25 > 0 and bm25_best > 0:
        parts["bm25"] = W_BM25 * bm25 / bm25_best
        if parts["bm25"] >= W_BM25 * 0.5 and not reasons:
            reasons.append("similar title/body text (BM25)")
    if query.target_repo and issue.repo.lower() == query.target_repo.lower():
        parts["same_repo"] = W_SAME_REPO
    v = _versions_overlap(query.versions, issue.versions)
    if v:
        parts["version"] = W_VERSION
        reasons.append(f"same {v}")
    if searched:
        parts["github_search"] = W_SEARCH
        reasons.append("GitHub search finds the exact error text")
    return min(1.0, sum(parts.values())), reasons, parts


def rank(index: IssueIndex, query: Query, *, extra: Iterable[IndexedIssue] = (), searched_refs: set[str] = frozenset(),
         top: int = TOP_N, min_score: float = MIN_SCORE) -> list[Related]:
    """Candidates from the index (message, frames, BM25) and ``extra`` (search hits), ranked."""
    bm = index.bm25(query.text, limit=60, split=query.message)
    ids = set(bm)
    ids.update(index.with_message(query.norm) if query.norm else [])
    ids.update(index.with_frames(query.frames[:3]))
    excluded = getattr(index, "excluded", None)     # (repo, number) left out (evaluation)
    candidates = {i.ref: i for i in index.by_ids(ids) if (i.repo, i.number) != excluded}
    for e in extra:
        candidates.setdefault(e.ref, e)
    best = max(bm.values(), default=0.0)
    share = index.message_share(query.norm) if query.norm else 0
    out: list[Related] = []
    for ref, issue in candidates.items():
        s, reasons, parts = score(query, issue, bm25=bm.get(issue.id, 0.0), bm25_best=best,
                                  share=max(share, 1), searched=ref in searched_refs)
        if s < min_score:
            continue
        fixed, note = fix_info(index, issue, query.versions)
        if fixed and issue.is_pr:
            reasons.append("merged PR: likely the fix")
        elif fixed:
            reasons.append(f"likely fixed in {fixed}" + (f" ({note})" if note else ""))
        elif note:
            reasons.append(note)
        out.append(Related(issue.repo, issue.number, issue.title, issue.url, issue.state, s,
                           "; ".join(reasons) or "weak text match", fixed, issue.is_pr, parts,
                           innermost=bool(query.frames) and query.frames[0] in issue.frames))
    out.extend(_linked_prs(index, out, query))
    best: dict[str, Related] = {}
    for r in out:
        k = f"{r.repo}#{r.number}"
        if k not in best or r.score > best[k].score:
            best[k] = r
    ranked = sorted(best.values(), key=lambda r: (-r.score, r.state != "open", -r.number))[:top]
    _calibrate(ranked, query)
    return ranked


def calibration_rows(ranked: list[Related], query: Query) -> list[list[float]]:
    """The calibration model's features of each ranked candidate (bot/upstream/calibration.py)."""
    from bot.upstream.calibration import vector

    full = {"message": W_MESSAGE, "frames": W_FRAMES, "bm25": W_BM25}
    generic = generic_message(query.message)
    return [vector(r.components, full=full, innermost=r.innermost,
                   margin=r.score - (ranked[i + 1].score if i + 1 < len(ranked) else 0.0),
                   generic=generic, query_frames=bool(query.frames)) for i, r in enumerate(ranked)]


def _calibrate(ranked: list[Related], query: Query) -> None:
    """Each candidate's probability of being the same failure (calibration.py), when fitted."""
    from bot.upstream.calibration import model

    fitted = model()
    if fitted is None:
        return
    for r, x in zip(ranked, calibration_rows(ranked, query), strict=True):
        r.probability = round(fitted.probability(x), 3)


def _linked_prs(index: IssueIndex, found: list[Related], query: Query) -> list[Related]:
    """The PRs tied to a matching issue: named as its fix in the thread, or naming it.

    A fix PR rarely carries the traceback, so text alone ranks it low; the link says it
    belongs with the issue. It ranks just below the issue it came from.
    """
    out: list[Related] = []
    for parent in sorted(found, key=lambda r: -r.score)[:TOP_N]:
        if parent.is_pr:
            continue
        ref = f"{parent.repo}#{parent.number}"
        issue = index.get(parent.repo, parent.number)
        linked: list[tuple[IndexedIssue, str]] = []
        for fix in (issue.fixed_by if issue else []):
            pr = index.get_ref(fix)
            if pr is not None:
                linked.append((pr, f"named as the fix of {ref}"))
        linked += [(pr, f"closes {ref}" if ref in pr.fixes else f"references {ref}")
                   for pr in index.prs_mentioning(ref)]
        for pr, why in linked:
            factor = 0.9 if (pr.merged and why.startswith(("named", "closes"))) else 0.8
            fixed, _ = fix_info(index, pr, query.versions)
            reason = f"PR {why}" + ("; merged" if pr.merged else f"; {pr.state}, not merged")
            out.append(Related(pr.repo, pr.number, pr.title, pr.url, pr.state, parent.score * factor, reason,
                               fixed if why.startswith(("named", "closes")) else None, True,
                               {"linked_from": parent.score}))
    return out


# --- GitHub search -------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"<(?:N|PATH|ADDR|TMP|HEX|UUID)>|\bat <ADDR>>")


def search_phrase(query: Query) -> str | None:
    """The longest literal stretch of the normalised message: an exact phrase for GitHub."""
    first = query.norm.splitlines()[0] if query.norm else ""
    chunks = [c.strip(" '\"`:,()[]") for c in _PLACEHOLDER.split(first)]
    chunks = [c.replace('"', "") for c in chunks if len(c) >= 16]
    if not chunks:
        return None
    phrase = max(chunks, key=len)[:200]
    from bot.scrub import scrub
    clean = scrub(phrase)
    if clean.findings:
        # Only the part of the message with nothing private in it goes to GitHub.
        pieces = [c.strip(" '\"`:,()[]") for c in re.split(r"<[^<>]*>", clean.text)]
        pieces = [c for c in pieces if len(c) >= 16]
        return max(pieces, key=len) if pieces and not clean.secrets else None
    return phrase


def github_search(client: Any, query: Query, repos: list[str], *, per_page: int = 10) -> list[IndexedIssue]:
    """GitHub issue search for the exact error phrase in the target repos (30/min budget)."""
    from bot.github_api import github_errors, search_throttle

    phrase = search_phrase(query)
    if not phrase:
        return []
    q = f'"{phrase}" ' + " ".join(f"repo:{r}" for r in repos)
    throttle = search_throttle(client)
    throttle.acquire()
    with github_errors("GitHub search"):
        headers, data = client.requester.requestJsonAndCheck("GET", "/search/issues",
                                                             {"q": q, "per_page": per_page})
    throttle.observe(headers)
    out: list[IndexedIssue] = []
    for k, item in enumerate(data.get("items", []) if isinstance(data, dict) else []):
        try:
            row = issue_row(item)
        except ValueError:
            continue
        out.append(IndexedIssue.from_row({"id": -1 - k, **row}))  # type: ignore[arg-type]
    return out


@dataclass
class DedupResult:
    results: list[Related]
    query: Query
    searched: bool
    search_note: str | None
    indexed: int
    index_source: str = "index"       # "bundled": the user's index was empty; reprobot's known issues
    notes: list[str] = field(default_factory=list)     # what was synced first, or why not

    def to_dict(self) -> dict[str, Any]:
        return {"results": [r.to_dict() for r in self.results],
                "query": {"exc_type": self.query.exc_type, "message": self.query.norm,
                          "frames": self.query.frames, "target_repo": self.query.target_repo},
                "github_search": {"used": self.searched, "note": self.search_note},
                "indexed_issues": self.indexed, "index_source": self.index_source, "notes": self.notes,
                "note": "candidates only: reprobot never labels or closes issues"}


def dedup(index: IssueIndex, failure: FailureReport, *, target_repo: str | None = None, client: Any = None,
          search_repos: list[str] | None = None, top: int = TOP_N) -> DedupResult:
    query = query_of(failure, target_repo)
    extra: list[IndexedIssue] = []
    searched = False
    note: str | None = None
    if client is not None:
        # No target: search the stack's repositories (torch's tracker is too large to search blind).
        ours = stack_packages()
        repos = search_repos or ([target_repo] if target_repo else
                                 [t.repo for t in targets() if t.packages[0] in ours])
        try:
            extra = github_search(client, query, repos)
            searched = True
        except ReprobotError as e:
            note = f"GitHub search skipped: {e.message}"
    results = rank(index, query, extra=extra, searched_refs={e.ref for e in extra}, top=top)
    return DedupResult(results, query, searched, note, index.count())
