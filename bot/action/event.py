"""The `discussion` event the Action runs on, read from ``$GITHUB_EVENT_PATH``.

The payload file is written by GitHub, but the discussion's body, title and logins in it are
the public's: they are data, never interpolated into a shell line or a query string. Only the
fields reprobot needs are kept, each type-checked, so a malformed payload is one clear error.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reducer.errors import ExitCode, ReprobotError

DEFAULT_LABEL = "needs-repro"
LABEL_ENV = "REPROBOT_LABEL"
# GitHub caps a discussion body at 65,536 characters; a payload far past that is not GitHub's.
MAX_EVENT_BYTES = 64 * 1024 * 1024
# Node ids are base64-ish ("D_kwDOABCD1234"); anything else is refused before it reaches a query.
_NODE_ID = re.compile(r"^[A-Za-z0-9_=+/-]{1,200}$")
_REPO = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38}|[A-Za-z0-9-]{0,30}\[bot\])$")


@dataclass(frozen=True)
class DiscussionEvent:
    action: str
    label: str
    node_id: str
    number: int
    title: str
    body: str
    html_url: str
    author: str
    repository: str
    repository_node_id: str
    sender: str
    # When GitHub wrote the payload's discussion: updated_at is at or after the last edit made
    # before the label (bot/action/freshness.py compares it with lastEditedAt).
    created_at: str = ""
    updated_at: str = ""

    @property
    def body_sha256(self) -> str:
        """The hash of the body this event carries: the one that runs, quoted in the reply."""
        return body_sha256(self.body)


def body_sha256(body: str) -> str:
    """sha256 of a discussion body as UTF-8, line endings as GitHub stores them."""
    return hashlib.sha256(body.encode("utf-8", "replace")).hexdigest()


def configured_label(label: str | None = None) -> str:
    """The label that triggers a run: the argument, else ``$REPROBOT_LABEL``, else needs-repro."""
    return (label or os.environ.get(LABEL_ENV) or DEFAULT_LABEL).strip()


def event_path(path: str | Path | None = None) -> Path:
    raw = path or os.environ.get("GITHUB_EVENT_PATH")
    if not raw:
        raise ReprobotError("no event: pass --event PATH or run inside GitHub Actions (GITHUB_EVENT_PATH)",
                            ExitCode.USAGE)
    return Path(raw)


def _get(d: Any, *keys: str, kind: type = str, default: Any = None) -> Any:
    cur = d
    for k in keys:
        cur = cur.get(k) if isinstance(cur, dict) else None
    if cur is None and default is not None:
        return default
    if not isinstance(cur, kind) or isinstance(cur, bool) and kind is not bool:
        raise ReprobotError(f"event payload: {'.'.join(keys)} missing or not a {kind.__name__}",
                            ExitCode.BAD_INPUT)
    return cur


def _utf8(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


def parse_event(payload: Any) -> DiscussionEvent:
    if not isinstance(payload, dict) or not isinstance(payload.get("discussion"), dict):
        raise ReprobotError("event payload: not a discussion event (no 'discussion' object)", ExitCode.BAD_INPUT)
    ev = DiscussionEvent(
        action=_get(payload, "action"),
        label=_get(payload, "label", "name", default=""),
        node_id=_get(payload, "discussion", "node_id"),
        number=_get(payload, "discussion", "number", kind=int),
        title=_get(payload, "discussion", "title", default=""),
        # GitHub sends null for an empty body.
        body=_get(payload, "discussion", "body", default=""),
        html_url=_get(payload, "discussion", "html_url", default=""),
        author=_get(payload, "discussion", "user", "login", default=""),
        repository=_get(payload, "repository", "full_name"),
        repository_node_id=_get(payload, "repository", "node_id", default=""),
        sender=_get(payload, "sender", "login"),
        created_at=_get(payload, "discussion", "created_at", default=""),
        updated_at=_get(payload, "discussion", "updated_at", default=""),
    )
    # JSON may carry lone surrogates, which cannot be written out as UTF-8: replace them here once.
    ev = replace(ev, body=_utf8(ev.body), title=_utf8(ev.title))
    if not _NODE_ID.match(ev.node_id):
        raise ReprobotError("event payload: discussion.node_id is not a GitHub node id", ExitCode.BAD_INPUT)
    if not _REPO.match(ev.repository):
        raise ReprobotError("event payload: repository.full_name is not owner/name", ExitCode.BAD_INPUT)
    if not _LOGIN.match(ev.sender):
        raise ReprobotError("event payload: sender.login is not a GitHub login", ExitCode.BAD_INPUT)
    return ev


def load_event(path: str | Path | None = None) -> DiscussionEvent:
    p = event_path(path)
    try:
        size = p.stat().st_size
        if size > MAX_EVENT_BYTES:
            raise ReprobotError(f"event payload: {size} bytes, over the {MAX_EVENT_BYTES} byte cap",
                                ExitCode.BAD_INPUT)
        payload = json.loads(p.read_bytes())
    except FileNotFoundError:
        raise ReprobotError(f"{p}: event file not found", ExitCode.FILE_MISSING) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReprobotError(f"{p}: event file is not JSON ({type(e).__name__})", ExitCode.BAD_INPUT) from None
    return parse_event(payload)
