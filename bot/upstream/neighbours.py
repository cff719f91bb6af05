"""Where similar failures went: the nearest indexed issues vote for the repository they were
filed at, or where their fix landed when the thread names a fixing PR in another repository.

The neighbours are dedup's own ranking (same message, shared frames, BM25), so a vote means
what a dedup hit means. Weak matches do not vote: a generic message alone routes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.upstream.dedup import query_of, rank
from bot.upstream.failure import FailureReport
from bot.upstream.prior import landed_repo
from bot.targets import stack_packages, targets

K = 5
MIN_NEIGHBOUR = 0.25     # below this a neighbour is a text match, not the same failure


@dataclass
class Vote:
    package: str
    repo: str
    share: float                  # of the voting neighbours' total score
    refs: list[str] = field(default_factory=list)


def _package_of() -> dict[str, str]:
    """repo -> the package its votes go to. torch's repository gets none: the index holds the
    stack's issues, and a fix that landed in torch says little about who triages the failure."""
    ours = stack_packages()
    return {t.repo: t.packages[0] for t in targets() if t.packages[0] in ours}


def _landed(index: Any, repo: str, number: int, package_of: dict[str, str]) -> str:
    """The repository the neighbour's fix landed in, when its thread names one elsewhere."""
    issue = index.get(repo, number)
    return landed_repo(repo, issue.fixed_by if issue else [], set(package_of))


def votes(index: Any, failure: FailureReport, k: int = K) -> list[Vote]:
    """The repositories the ``k`` nearest indexed failures point at, best first. An index may
    carry ``excluded`` = (repo, number): that issue is not its own neighbour (evaluation)."""
    if index is None or not failure.record.message:
        return []
    excluded = getattr(index, "excluded", None)
    hits = [r for r in rank(index, query_of(failure), top=k + 1, min_score=MIN_NEIGHBOUR)
            if (r.repo, r.number) != excluded][:k]
    tally: dict[str, Vote] = {}
    total = sum(r.score for r in hits)
    package_of = _package_of()
    for r in hits:
        repo = _landed(index, r.repo, r.number, package_of)
        if repo not in package_of:
            continue
        vote = tally.setdefault(repo, Vote(package_of[repo], repo, 0.0))
        vote.share += r.score / total
        vote.refs.append(f"{r.repo.split('/')[-1]}#{r.number}")
    return sorted(tally.values(), key=lambda v: -v.share)
