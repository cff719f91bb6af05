"""GitHub side of the Action: who may trigger it, and the one reply it keeps up to date.

- Permission: ``GET /repos/{owner}/{repo}/collaborators/{user}/permission`` (needs only the
  token's metadata read access). Triage or more lets a run go ahead: ``role_name`` triage,
  maintain or admin, or the legacy ``permission`` write/maintain/admin (custom roles report
  their base role's legacy permission, so a custom role built on write still counts).
- Reply: GraphQL ``addDiscussionComment`` on the discussion's node id; a re-run finds its own
  earlier reply (authored by this token's viewer AND carrying the hidden marker
  ``<!-- reprobot:discussion=<node_id> -->``) and edits it with ``updateDiscussionComment``.
  Requiring both means a user who pastes the marker into their own comment cannot make
  reprobot try to edit it, and a reply of another bot is never touched.
"""
from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from github import Github, UnknownObjectException

from bot.action.render import marker
from bot.issue.github import github_errors, graphql
from reducer.errors import ExitCode, ReprobotError

TRIAGE_ROLES = frozenset({"triage", "maintain", "admin"})
TRIAGE_PERMISSIONS = frozenset({"write", "maintain", "admin"})
MAX_COMMENT_PAGES = 20

COMMENTS_QUERY = """
query($id: ID!, $after: String) {
  node(id: $id) {
    ... on Discussion {
      comments(first: 100, after: $after) {
        nodes { id url body viewerDidAuthor }
        pageInfo { hasNextPage endCursor }
      }
    }
  }
}
"""
ADD_COMMENT = """
mutation($discussionId: ID!, $body: String!) {
  addDiscussionComment(input: {discussionId: $discussionId, body: $body}) { comment { id url } }
}
"""
UPDATE_COMMENT = """
mutation($commentId: ID!, $body: String!) {
  updateDiscussionComment(input: {commentId: $commentId, body: $body}) { comment { id url } }
}
"""


@dataclass(frozen=True)
class Permission:
    user: str
    role_name: str
    permission: str

    @property
    def can_triage(self) -> bool:
        return self.role_name in TRIAGE_ROLES or self.permission in TRIAGE_PERMISSIONS


def sender_permission(client: Github, repo: str, user: str) -> Permission:
    path = (f"/repos/{urllib.parse.quote(repo, safe='/')}/collaborators/"
            f"{urllib.parse.quote(user, safe='')}/permission")
    with github_errors(f"permission of {user} on {repo}"):
        try:
            _headers, data = client.requester.requestJsonAndCheck("GET", path)
        except UnknownObjectException:  # no such user: no access, not an error
            return Permission(user, "none", "none")
    if not isinstance(data, dict):
        raise ReprobotError(f"permission of {user} on {repo}: unexpected answer from GitHub", ExitCode.NETWORK)
    role = data.get("role_name")
    perm = data.get("permission")
    return Permission(user, role if isinstance(role, str) else "", perm if isinstance(perm, str) else "")


def find_own_reply(client: Github, node_id: str) -> str | None:
    """The id of this token's earlier reply on the discussion, or None."""
    want = marker(node_id)
    after: str | None = None
    for _ in range(MAX_COMMENT_PAGES):
        data = graphql(COMMENTS_QUERY, {"id": node_id, "after": after}, client=client)
        node = data.get("node")
        if not isinstance(node, dict):
            raise ReprobotError(f"discussion {node_id}: not found on GitHub", ExitCode.BAD_INPUT)
        comments: dict[str, Any] = node.get("comments") or {}
        for c in comments.get("nodes") or []:
            if (isinstance(c, dict) and c.get("viewerDidAuthor") is True and isinstance(c.get("body"), str)
                    and c["body"].lstrip().startswith(want)):
                return str(c["id"])
        page = comments.get("pageInfo") or {}
        if not page.get("hasNextPage"):
            return None
        after = page.get("endCursor")
    return None


@dataclass(frozen=True)
class Posted:
    action: str     # "added" | "updated"
    comment_id: str
    url: str


def post_reply(client: Github, node_id: str, body: str) -> Posted:
    """Add the reply, or edit the one posted before. The mutation is sent once (no retry)."""
    if not body.lstrip().startswith(marker(node_id)):
        raise ValueError("a reply must start with its marker, or a re-run could not find it")
    existing = find_own_reply(client, node_id)
    if existing is not None:
        data = graphql(UPDATE_COMMENT, {"commentId": existing, "body": body}, client=client)
        comment = (data.get("updateDiscussionComment") or {}).get("comment") or {}
        return Posted("updated", str(comment.get("id", existing)), str(comment.get("url", "")))
    data = graphql(ADD_COMMENT, {"discussionId": node_id, "body": body}, client=client)
    comment = (data.get("addDiscussionComment") or {}).get("comment") or {}
    if not comment.get("id"):
        raise ReprobotError(f"discussion {node_id}: GitHub did not return the new comment", ExitCode.NETWORK)
    return Posted("added", str(comment["id"]), str(comment.get("url", "")))
