"""Is the discussion body GitHub shows now the one that was labelled? (issue #39)

What a maintainer reviewed is the post they labelled. The ``discussion`` ``labeled`` event's
payload carries the body as it was when GitHub wrote the event, and ``discussion.updated_at``,
which is at or after the last edit GitHub had then (an edit moves it; a label may too). The
payload has no time of the label itself. GraphQL's ``Discussion`` gives the body now and
``lastEditedAt`` (the last edit of the body, by anyone; null when it was never edited). So:

- the body now differs from the payload's (line endings aside): it was edited after the label;
- ``lastEditedAt`` is later than the payload's ``updated_at``: it was edited after the label,
  even if the text was put back (an edit the maintainer did not see came and went);
- otherwise the body that runs is the one labelled and the one shown. When ``lastEditedAt`` is
  set (an edit before the label), the reply says when, so the maintainer can tell whether they
  read the post before or after it.

The gate asks before anything runs (an edited body is then not run at all); publish asks again
after the run, so an edit made during a long reduction gets the "edited" reply, not results for
a body that is no longer there.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.action.event import DiscussionEvent, body_sha256
from reducer.errors import ExitCode, ReprobotError

DISCUSSION_BODY = """
query($id: ID!) {
  node(id: $id) {
    ... on Discussion { body lastEditedAt updatedAt }
  }
}
"""
SHORT = 12     # hex digits of a body's sha256 quoted in a reply


@dataclass(frozen=True)
class BodyCheck:
    edited_after_label: bool
    labelled_sha256: str            # the payload's body: what runs
    current_sha256: str             # the body GitHub shows now
    last_edited_at: str | None      # when the body was last edited, if ever (GitHub's ISO time)
    reason: str                     # one line, for the log and the reply


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _same(a: str, b: str) -> bool:
    # The web editor stores CRLF; a payload and the API give the same stored text, but a copy
    # that went through another tool may not: line endings render alike and run alike.
    return a.replace("\r\n", "\n") == b.replace("\r\n", "\n")


def judge(event: DiscussionEvent, body: str, last_edited_at: str | None) -> BodyCheck:
    """The rule, on what GitHub answered: ``body`` and ``lastEditedAt`` of the discussion now."""
    labelled, current = event.body_sha256, body_sha256(body)
    edited, labelled_at = _time(last_edited_at), _time(event.updated_at)
    if not _same(body, event.body):
        why = "the post was edited after the label was added: its text is not the one labelled"
        return BodyCheck(True, labelled, current, last_edited_at, why)
    if edited is not None and labelled_at is not None and edited > labelled_at:
        why = f"the post was edited after the label was added (last edit {last_edited_at})"
        return BodyCheck(True, labelled, current, last_edited_at, why)
    why = (f"the post is as labelled (last edited {last_edited_at}, before the label)" if last_edited_at
           else "the post is as labelled (never edited)")
    return BodyCheck(False, labelled, current, last_edited_at, why)


def check_body(client: Any, event: DiscussionEvent) -> BodyCheck:
    """Ask GitHub for the discussion's body now and judge it against the event's."""
    from bot.issue.github import graphql

    data = graphql(DISCUSSION_BODY, {"id": event.node_id}, client=client)
    node = data.get("node")
    if not isinstance(node, dict) or not isinstance(node.get("body"), str):
        raise ReprobotError(f"discussion {event.node_id}: its body could not be read from GitHub", ExitCode.NETWORK)
    last = node.get("lastEditedAt")
    return judge(event, node["body"], last if isinstance(last, str) else None)
