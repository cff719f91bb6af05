"""The GitHub Action's three steps, one per workflow job (.github/workflows/reprobot-discussion.yml).

``gate``      (token: metadata and discussions read)   is the label ours, may the sender trigger a
              run, and is the post still the one labelled (bot/action/freshness.py)?
``reproduce`` (no token, no secrets)   script from the body → reduction → artifact folder
``publish``   (token: discussions write) artifact (untrusted) → one reply, edited on re-runs

Each step re-checks what it can on its own (publish re-checks the label, the sender's
permission and whether the post was edited since the label), so removing one ``if:`` from the
workflow does not open the door.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from github import Github

from bot.action.event import DiscussionEvent, configured_label
from bot.action.freshness import BodyCheck, check_body
from bot.action.publish import Permission, Posted, post_reply, sender_permission
from bot.action.render import Reply, load_reply, md_text, render_reply
from bot.action.reproduce import ReproduceOptions, reproduce
from bot.action.result import SILENT, ActionResult
from reducer.errors import ReprobotError

__all__ = ["GateDecision", "PublishOutcome", "gate", "reproduce", "ReproduceOptions", "publish", "set_output"]


@dataclass(frozen=True)
class GateDecision:
    allowed: bool                       # run the posted code
    reason: str
    permission: Permission | None = None
    body: BodyCheck | None = None       # the post now against the post labelled

    @property
    def edited(self) -> bool:
        """The sender may trigger a run, but the post changed after the label: nothing runs, and
        publish replies so (the workflow's ``edited`` output)."""
        return self.body is not None and self.body.edited_after_label


def gate(event: DiscussionEvent, client: Github, label: str | None = None) -> GateDecision:
    want = configured_label(label)
    if event.action != "labeled" or event.label != want:
        return GateDecision(False, f"label {event.label!r} is not {want!r}: nothing to do")
    perm = sender_permission(client, event.repository, event.sender)
    if not perm.can_triage:
        return GateDecision(False, f"{event.sender} has {perm.role_name or perm.permission or 'no'} access; "
                                   "triage or more is needed to run reprobot", perm)
    who = f"{event.sender} has {perm.role_name or perm.permission} access"
    body = check_body(client, event)
    if body.edited_after_label:
        return GateDecision(False, f"{who}, but {body.reason}: not run", perm, body)
    return GateDecision(True, f"{who}; {body.reason}", perm, body)


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
    # The post now, against the post labelled: an edit since then (before or during the run)
    # gets the "edited" reply, never results for a body that is no longer there.
    fresh = check_body(client, event) if client is not None else None
    if fresh is not None and fresh.edited_after_label:
        result = ActionResult(status="edited", discussion=event.number, detail=fresh.reason)
    else:
        try:
            result = ActionResult.read_untrusted(artifact)
        except ReprobotError as e:
            result = _unreadable(event, e)
    if result.status in SILENT:
        return PublishOutcome(None, f"status {result.status}: no reply")
    reply = load_reply(artifact, event.node_id, result) if result.status != "edited" else Reply(
        status="edited", node_id=event.node_id, result=result, detail=md_text(result.detail, 300))
    # The hash is the event's (what the reproduce job read), not the artifact's word for it.
    reply.body_sha256 = event.body_sha256
    reply.current_sha256 = fresh.current_sha256 if fresh is not None else ""
    reply.last_edited_at = md_text(fresh.last_edited_at or "", 40) if fresh is not None else ""
    body = render_reply(reply)
    if dry_run or client is None:
        return PublishOutcome(None, "dry run: not posted", body)
    posted = post_reply(client, event.node_id, body)
    return PublishOutcome(posted, f"{posted.action} {md_text(posted.url, 200)}", body)
