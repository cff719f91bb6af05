"""Known upstream issues bundled with reprobot (bot/data/upstream/*.jsonl, facts only), as the
GitHub issue objects the index imports: so `dedup` and routing's neighbour vote have something
to match before a user's first `index sync`.

Each line holds an issue's title, state, error line, the innermost library frames its thread
showed, the user's call, and where it was fixed; the body built here carries the error as a
traceback so the index extracts the same fields it extracts from a synced issue.
"""
from __future__ import annotations

import json
from importlib import resources
from typing import Any

PARTS = ("train", "heldout")


def known_issues() -> list[dict[str, Any]]:
    """Every bundled issue (both parts of the labelled set)."""
    out: list[dict[str, Any]] = []
    for part in PARTS:
        text = resources.files("bot").joinpath(f"data/upstream/{part}.jsonl").read_text(encoding="utf-8")
        out.extend(json.loads(line) for line in text.splitlines() if line.strip())
    return out


def traceback_text(issue: dict[str, Any], site: str = "site-packages/") -> str:
    """The error as the thread showed it: its library frames under the user's call, or the
    error line alone when the thread showed no frames."""
    error = f"{issue['exc_type']}: {issue['message']}"
    frames = [f for f in issue.get("frames") or [] if ":" in f]
    if not frames:
        return error + "\n"
    lines = ["Traceback (most recent call last):", '  File "script.py", line 1, in <module>',
             f"    {issue.get('entry_call') or 'main()'}"]
    for frame in frames:
        rel, func = frame.rsplit(":", 1)
        lines.append(f'  File "{site}{rel}", line 1, in {func}')
    return "\n".join(lines + [error]) + "\n"


def issue_object(issue: dict[str, Any], body: str | None = None) -> dict[str, Any]:
    """The object ``GET /repos/{o}/{r}/issues`` returns for it; ``body`` defaults to the error
    as a traceback. The thread's facts (fixing PRs, release, duplicates) ride along as
    ``reprobot_thread`` comments, which the index reads like a synced issue's comments."""
    if body is None:
        body = ("### Reproduction\n\n```\n" + traceback_text(issue) + "```"
                if issue.get("exc_type") and issue.get("message") else "")
    repo, n = issue["repo"], int(issue["number"])
    created = (issue.get("created") or "2024-01-01") + "T12:00:00Z"
    thread = [f"fixed by {x}" for x in issue.get("fixed_by") or []]
    thread += [f"fixed in {issue['fixed_in']}"] if issue.get("fixed_in") else []
    thread += [f"duplicate of {x}" for x in issue.get("duplicate_of") or []]
    closed = issue.get("state") == "closed"
    return {"url": f"https://api.github.com/repos/{repo}/issues/{n}",
            "repository_url": f"https://api.github.com/repos/{repo}",
            "html_url": f"https://github.com/{repo}/issues/{n}", "number": n, "title": issue["title"],
            "body": body, "state": issue.get("state") or "open",
            "state_reason": "completed" if closed else None, "labels": [],
            "comments": len(thread), "created_at": created, "updated_at": created,
            "closed_at": created if closed else None, "user": {"login": "reporter"},
            "reprobot_thread": thread}


def seed(index: Any) -> Any:
    """Load the bundled issues into ``index`` (an IssueIndex); already-synced issues are
    overwritten only where the index holds nothing newer."""
    from bot.upstream.index import import_objects

    fresh = [issue_object(i) for i in known_issues() if index.get(i["repo"], int(i["number"])) is None]
    return import_objects(index, fresh, source="bundled known issues", watermark=False)
