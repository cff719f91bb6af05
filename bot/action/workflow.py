"""The GitHub Action's three steps, one per workflow job (.github/workflows/reprobot-discussion.yml).

``gate``      (token: metadata read)   is the label ours, and may the sender trigger a run?
``reproduce`` (no token, no secrets)   script from the body → reduction → artifact folder
``publish``   (token: discussions write) artifact (untrusted) → one reply, edited on re-runs

Each step re-checks what it can on its own (publish re-checks the label and the sender's
permission), so removing one ``if:`` from the workflow does not open the door.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from github import Github

from bot.action.event import DiscussionEvent, configured_label
from bot.action.publish import Permission, Posted, post_reply, sender_permission
from bot.action.render import load_reply, md_text, render_reply
from bot.action.reproduce import ReproduceOptions, reproduce
from bot.action.result import SILENT, ActionResult
from reducer.errors import ReprobotError

__all__ = ["GateDecision", "PublishOutcome", "gate", "reproduce", "ReproduceOptions", "publish", "set_output"]


@dataclass(frozen=True)
class GateDecision:
    allowed: bool
    reason: str
    permission: Permission | None = None


def gate(event: DiscussionEvent, client: Github, label: str | None = None) -> GateDecision:
    want = configured_label(label)
    if event.action != "labeled" or event.label != want:
        return GateDecision(False, f"label {event.label!r} is not {want!r}: nothing to do")
    perm = sender_permission(client, event.repository, event.sender)
    if not perm.can_triage:
        return GateDecision(False, f"{event.sender} has {perm.role_name or perm.permission or 'no'} access; "
                                   "triage or more is needed to run reprobot", perm)
    return GateDecision(True, f"{event.sender} has {perm.role_name or perm.permission} access", perm)


def set_output(name: str, value: str) -> None:
    """A step output for later jobs (``$GITHUB_OUTPUT``); a no-op outside Actions."""
    path = os.environ.get("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{name}={value}\n")


@dataclass(frozen=True)
class PublishOutcome:
    posted: Posted | None
    reason: str
    body: str | None = None


def _unreadable(event: DiscussionEvent, err: ReprobotError) -> ActionResult:
    # The artifact is missing or does not pass the schema check: say so, quote nothing of it.
    return ActionResult(status="error", discussion=event.number, detail=f"the run's result could not be read "
                                                                        f"({err.message[:120]})")


def publish(event: DiscussionEvent, artifact: Path, client: Github | None, *, label: str | None = None,
            dry_run: bool = False) -> PublishOutcome:
    want = configured_label(label)
    if event.label != want:
        return PublishOutcome(None, f"label {event.label!r} is not {want!r}: nothing to do")
    if client is not None:
        perm = sender_permission(client, event.repository, event.sender)
        if not perm.can_triage:
            return PublishOutcome(None, f"{event.sender} cannot triage: no reply")
    try:
        result = ActionResult.read_untrusted(artifact)
    except ReprobotError as e:
        result = _unreadable(event, e)
    if result.status in SILENT:
        return PublishOutcome(None, f"status {result.status}: no reply")
    body = render_reply(load_reply(artifact, event.node_id, result))
    if dry_run or client is None:
        return PublishOutcome(None, "dry run: not posted", body)
    posted = post_reply(client, event.node_id, body)
    return PublishOutcome(posted, f"{posted.action} {md_text(posted.url, 200)}", body)
