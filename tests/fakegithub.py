"""A local GitHub: a real HTTP server on 127.0.0.1 speaking the REST and GraphQL shapes
reprobot uses, with in-memory state, a request log and fault injection.

Payloads follow the GitHub REST docs (issue, comment, repository, search, rate_limit
objects; Link-header pagination; X-RateLimit-* headers on every response; the 403 body of a
secondary rate limit), so real PyGithub runs against it unmodified:

    with FakeGitHub() as gh:
        gh.add_repo("huggingface/peft")
        gh.add_issue("huggingface/peft", title="...", body="...")
        client = github_client("tok", api_url=gh.url)

Other helpers ADD routes (a new ``_route`` entry and handler method); never rewrite these.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import re
import shlex
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

DOCS = "https://docs.github.com/rest"
SECONDARY_LIMIT_MESSAGE = ("You have exceeded a secondary rate limit. "
                           "Please wait a few minutes before you try again.")
PRIMARY_LIMIT_MESSAGE = "API rate limit exceeded for user ID 1."


def iso(ts: datetime | str | None) -> str | None:
    if ts is None or isinstance(ts, str):
        return ts
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


@dataclass
class LoggedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]   # Authorization left out: the log never holds a token
    body: Any
    status: int = 0
    user: str | None = None   # the login the token maps to, None when anonymous


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    headers: dict[str, str]
    body: Any
    times: int
    after: bool  # True: perform the request's effect, THEN answer with the failure


@dataclass
class RateBucket:
    limit: int
    remaining: int
    reset: int
    used: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"limit": self.limit, "used": self.used, "remaining": self.remaining, "reset": self.reset}


@dataclass
class Discussion:
    node_id: str
    repo: str
    number: int
    title: str
    body: str
    comments: list[dict[str, Any]] = field(default_factory=list)
    # GraphQL's Discussion times (ISO, Z): createdAt, updatedAt, and lastEditedAt (null until
    # the body is edited); userContentEdits holds one entry per edit, newest first as GitHub lists it.
    created_at: str = "2026-11-20T10:00:00Z"
    updated_at: str = "2026-11-20T10:00:00Z"
    last_edited_at: str | None = None
    edits: list[dict[str, Any]] = field(default_factory=list)


class FakeGitHub:
    """In-memory GitHub behind a ThreadingHTTPServer on 127.0.0.1 (random port)."""

    def __init__(self, *, tokens: dict[str, str] | None = None, require_auth: bool = False,
                 core_limit: int = 5000, search_limit: int = 30, graphql_limit: int = 5000) -> None:
        # token -> login; any unknown token is rejected with 401 like GitHub does.
        self.tokens = dict(tokens or {"test-token": "reprobot-bot"})
        self.require_auth = require_auth
        self.repos: dict[str, dict[str, Any]] = {}
        self.issues: dict[str, dict[int, dict[str, Any]]] = {}
        self.comments: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.permissions: dict[tuple[str, str], str] = {}
        self.discussions: dict[str, Discussion] = {}
        self.requests: list[LoggedRequest] = []
        self.faults: list[Fault] = []
        reset = int(time.time()) + 3600
        self.rate = {"core": RateBucket(core_limit, core_limit, reset),
                     "search": RateBucket(search_limit, search_limit, int(time.time()) + 60),
                     "graphql": RateBucket(graphql_limit, graphql_limit, reset)}
        self._ids = itertools.count(1_000_001)
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # --- lifecycle -----------------------------------------------------------------------
    def start(self) -> FakeGitHub:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fakegithub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- state setup -----------------------------------------------------------------------
    def _user(self, login: str) -> dict[str, Any]:
        uid = abs(hash(login)) % 10_000_000
        return {"login": login, "id": uid, "node_id": f"U_fake{uid}", "type": "User", "site_admin": False,
                "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
                "url": f"{self.url}/users/{login}", "html_url": f"https://github.com/{login}"}

    def add_repo(self, full_name: str, *, private: bool = False, has_discussions: bool = True) -> dict[str, Any]:
        owner, name = full_name.split("/")
        with self._lock:
            rid = next(self._ids)
            repo = {
                "id": rid, "node_id": f"R_fake{rid}", "name": name, "full_name": full_name,
                "private": private, "owner": {**self._user(owner), "type": "Organization"},
                "html_url": f"https://github.com/{full_name}", "description": None, "fork": False,
                "url": f"{self.url}/repos/{full_name}",
                "issues_url": f"{self.url}/repos/{full_name}/issues{{/number}}",
                "default_branch": "main", "has_issues": True, "has_discussions": has_discussions,
                "open_issues_count": 0, "visibility": "private" if private else "public",
                "created_at": "2020-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
                "pushed_at": "2026-01-01T00:00:00Z", "archived": False, "disabled": False,
            }
            self.repos[full_name.lower()] = repo
            self.issues.setdefault(full_name.lower(), {})
            return repo

    def _next_number(self, key: str) -> int:
        return max(self.issues[key], default=0) + 1

    def add_issue(self, repo: str, *, title: str, body: str | None = "", number: int | None = None,
                  state: str = "open", labels: list[str] | tuple[str, ...] = (), user: str = "octocat",
                  created_at: datetime | str | None = None, updated_at: datetime | str | None = None,
                  closed_at: datetime | str | None = None, is_pr: bool = False,
                  state_reason: str | None = None, merged_at: datetime | str | None = None) -> dict[str, Any]:
        key = repo.lower()
        with self._lock:
            if key not in self.repos:
                self.add_repo(repo)
            full = self.repos[key]["full_name"]
            n = number if number is not None else self._next_number(key)
            now = datetime.now(timezone.utc)
            created = iso(created_at or now)
            iid = next(self._ids)
            kind = "pull" if is_pr else "issues"
            issue: dict[str, Any] = {
                "id": iid, "node_id": f"{'PR' if is_pr else 'I'}_kwfake{iid}",
                "url": f"{self.url}/repos/{full}/issues/{n}",
                "repository_url": f"{self.url}/repos/{full}",
                "labels_url": f"{self.url}/repos/{full}/issues/{n}/labels{{/name}}",
                "comments_url": f"{self.url}/repos/{full}/issues/{n}/comments",
                "events_url": f"{self.url}/repos/{full}/issues/{n}/events",
                "html_url": f"https://github.com/{full}/{kind}/{n}",
                "number": n, "state": state,
                "state_reason": state_reason if state_reason else ("completed" if state == "closed" and not is_pr else None),
                "title": title, "body": body, "user": self._user(user),
                "labels": [self._label(full, name) for name in labels],
                "assignee": None, "assignees": [], "milestone": None, "locked": False,
                "active_lock_reason": None, "comments": 0,
                "created_at": created, "updated_at": iso(updated_at) or created,
                "closed_at": iso(closed_at) or (created if state == "closed" else None),
                "closed_by": None, "author_association": "NONE", "draft": False if is_pr else None,
                "reactions": {"url": f"{self.url}/repos/{full}/issues/{n}/reactions", "total_count": 0,
                              "+1": 0, "-1": 0, "laugh": 0, "hooray": 0, "confused": 0, "heart": 0,
                              "rocket": 0, "eyes": 0},
                "timeline_url": f"{self.url}/repos/{full}/issues/{n}/timeline",
                "performed_via_github_app": None,
            }
            if is_pr:
                issue["pull_request"] = {
                    "url": f"{self.url}/repos/{full}/pulls/{n}",
                    "html_url": f"https://github.com/{full}/pull/{n}",
                    "diff_url": f"https://github.com/{full}/pull/{n}.diff",
                    "patch_url": f"https://github.com/{full}/pull/{n}.patch",
                    "merged_at": iso(merged_at),
                }
            else:
                issue.pop("draft")
            self.issues[key][n] = issue
            self.comments.setdefault((key, n), [])
            return issue

    def _label(self, full: str, name: str) -> dict[str, Any]:
        lid = abs(hash((full, name))) % 10_000_000
        return {"id": lid, "node_id": f"LA_fake{lid}", "url": f"{self.url}/repos/{full}/labels/{urllib.parse.quote(name)}",
                "name": name, "color": "d73a4a", "default": name == "bug", "description": None}

    def add_comment(self, repo: str, number: int, body: str, *, user: str = "octocat",
                    created_at: datetime | str | None = None) -> dict[str, Any]:
        key = repo.lower()
        with self._lock:
            issue = self.issues[key][number]
            full = self.repos[key]["full_name"]
            cid = next(self._ids)
            ts = iso(created_at or datetime.now(timezone.utc))
            comment = {"id": cid, "node_id": f"IC_kwfake{cid}", "url": f"{self.url}/repos/{full}/issues/comments/{cid}",
                       "html_url": f"{issue['html_url']}#issuecomment-{cid}", "body": body,
                       "user": self._user(user), "created_at": ts, "updated_at": ts,
                       "issue_url": issue["url"], "author_association": "NONE"}
            self.comments[(key, number)].append(comment)
            issue["comments"] += 1
            return comment

    def set_permission(self, repo: str, user: str, permission: str) -> None:
        """``permission`` is one of admin, maintain, write, triage, read, none."""
        self.permissions[(repo.lower(), user.lower())] = permission

    def add_discussion(self, repo: str, *, number: int, title: str = "", body: str = "",
                       created_at: datetime | str = "2026-11-20T10:00:00Z") -> str:
        with self._lock:
            node_id = f"D_kwDOfake{next(self._ids)}"
            when = iso(created_at) or ""
            self.discussions[node_id] = Discussion(node_id, repo, number, title, body, created_at=when,
                                                   updated_at=when)
            return node_id

    def edit_discussion(self, node_id: str, body: str, *, at: datetime | str, editor: str = "alice") -> None:
        """The author (or anyone allowed) edits the body at ``at``: lastEditedAt and updatedAt move,
        and the edit is listed in userContentEdits, as GitHub does."""
        with self._lock:
            d = self.discussions[node_id]
            when = iso(at) or ""
            d.edits.insert(0, {"id": f"UCE_fake{next(self._ids)}", "editedAt": when, "createdAt": when,
                               "updatedAt": when, "deletedAt": None, "editor": {"login": editor},
                               "diff": body})
            d.body, d.last_edited_at, d.updated_at = body, when, when

    def add_discussion_comment(self, discussion_id: str, body: str, *, author: str = "octocat") -> dict[str, Any]:
        with self._lock:
            d = self.discussions[discussion_id]
            cid = f"DC_kwDOfake{next(self._ids)}"
            comment = {"id": cid, "body": body, "author": {"login": author},
                       "url": f"https://github.com/{d.repo}/discussions/{d.number}#discussioncomment-{cid}",
                       "createdAt": iso(datetime.now(timezone.utc))}
            d.comments.append(comment)
            return comment

    def set_rate(self, resource: str, *, remaining: int, reset: int | None = None) -> None:
        bucket = self.rate[resource]
        bucket.remaining = remaining
        if reset is not None:
            bucket.reset = reset

    def fail_next(self, method: str, path_regex: str, status: int, headers: dict[str, str] | None = None,
                  times: int = 1, *, body: Any = None, after: bool = False) -> None:
        """The next ``times`` requests matching METHOD and ``path_regex`` (searched in the path,
        no query) get ``status``. ``after=True`` lets the request take effect first (a 502 on
        a POST that DID create the issue). A 403 with Retry-After gets the secondary-limit body.
        ``status=0`` drops the connection without any answer (the client sees a reset)."""
        with self._lock:
            self.faults.append(Fault(method.upper(), re.compile(path_regex), status, dict(headers or {}),
                                     body, times, after))

    # --- log helpers -----------------------------------------------------------------------
    def requests_to(self, method: str, path_regex: str) -> list[LoggedRequest]:
        pat = re.compile(path_regex)
        return [r for r in list(self.requests) if r.method == method.upper() and pat.search(r.path)]

    def issue(self, repo: str, number: int) -> dict[str, Any]:
        return self.issues[repo.lower()][number]

    # --- request dispatch ----------------------------------------------------------------------
    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for f in self.faults:
                if f.method == method and f.pattern.search(path) and f.times > 0:
                    f.times -= 1
                    if f.times == 0:
                        self.faults.remove(f)
                    return f
        return None

    @staticmethod
    def _resource(path: str) -> str:
        if path.startswith("/search/"):
            return "search"
        if path == "/graphql":
            return "graphql"
        return "core"

    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], Any]:
        parsed = urllib.parse.urlsplit(raw_path)
        path = parsed.path.rstrip("/") or "/"
        query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
        payload: Any = None
        if body:
            try:
                payload = json.loads(body)
            except ValueError:
                payload = body.decode("utf-8", "replace")
        auth = headers.get("authorization", "")
        token = auth.split(None, 1)[1] if " " in auth else None
        entry = LoggedRequest(method, path, query, {k: v for k, v in headers.items() if k != "authorization"},
                              payload)
        with self._lock:
            self.requests.append(entry)
        user: str | None = None
        resource = self._resource(path)
        bucket = self.rate[resource]
        if token is not None:
            if token not in self.tokens:
                entry.status = 401
                return 401, self._rate_headers(resource), {"message": "Bad credentials", "documentation_url": DOCS,
                                                           "status": "401"}
            user = self.tokens[token]
        entry.user = user
        fault = self._take_fault(method, path)
        if fault and not fault.after:
            entry.status = fault.status
            return self._fault_response(fault, resource)
        with self._lock:
            if bucket.remaining <= 0:
                entry.status = 403
                hdrs = self._rate_headers(resource)
                return 403, hdrs, {"message": PRIMARY_LIMIT_MESSAGE + " (But here's the good news: ...)",
                                   "documentation_url": DOCS + "/overview/rate-limits-for-the-rest-api"}
            bucket.remaining -= 1
            bucket.used += 1
        if self.require_auth and user is None and path != "/rate_limit":
            status, hdrs, out = 401, {}, {"message": "Requires authentication", "documentation_url": DOCS,
                                          "status": "401"}
        else:
            status, hdrs, out = self._dispatch(method, path, query, payload, user)
        if fault:  # after=True: the effect happened, the client sees a failure anyway
            entry.status = fault.status
            return self._fault_response(fault, resource)
        if method == "GET" and status == 200:
            # Conditional requests, as GitHub answers them: a weak ETag of the body; a matching
            # If-None-Match gets 304 with no body, and a 304 is not charged to the rate limit.
            etag = 'W/"' + hashlib.sha1(json.dumps(out, sort_keys=True).encode()).hexdigest() + '"'
            hdrs = {**hdrs, "ETag": etag}
            if headers.get("if-none-match") == etag:
                with self._lock:
                    bucket.remaining += 1
                    bucket.used -= 1
                status, out = 304, None
        entry.status = status
        return status, {**self._rate_headers(resource), **hdrs}, out

    def _fault_response(self, fault: Fault, resource: str) -> tuple[int, dict[str, str], Any]:
        body = fault.body
        if body is None:
            if fault.status in (403, 429) and any(k.lower() == "retry-after" for k in fault.headers):
                body = {"message": SECONDARY_LIMIT_MESSAGE, "documentation_url": DOCS}
            else:
                try:
                    phrase = HTTPStatus(fault.status).phrase
                except ValueError:
                    phrase = "Error"
                body = {"message": phrase, "documentation_url": DOCS}
        return fault.status, {**self._rate_headers(resource), **fault.headers}, body

    def _rate_headers(self, resource: str) -> dict[str, str]:
        b = self.rate[resource]
        return {"X-RateLimit-Limit": str(b.limit), "X-RateLimit-Remaining": str(max(b.remaining, 0)),
                "X-RateLimit-Reset": str(b.reset), "X-RateLimit-Used": str(b.used),
                "X-RateLimit-Resource": resource, "X-GitHub-Api-Version-Selected": "2022-11-28",
                "X-GitHub-Request-Id": f"FAKE:{len(self.requests):06d}"}

    _routes: ClassVar[list[tuple[str, re.Pattern[str], str]]] = [
        ("GET", re.compile(r"^/rate_limit$"), "_get_rate_limit"),
        ("GET", re.compile(r"^/user$"), "_get_user"),
        ("GET", re.compile(r"^/search/issues$"), "_search_issues"),
        ("POST", re.compile(r"^/graphql$"), "_graphql"),
        ("GET", re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)$"), "_get_repo"),
        ("GET", re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues$"), "_list_issues"),
        ("POST", re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues$"), "_create_issue"),
        ("GET", re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<number>\d+)$"), "_get_issue"),
        ("GET", re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<number>\d+)/comments$"), "_list_comments"),
        ("POST", re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<number>\d+)/comments$"), "_create_comment"),
        ("GET", re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/collaborators/(?P<login>[^/]+)/permission$"),
         "_get_permission"),
    ]

    def _dispatch(self, method: str, path: str, query: dict[str, list[str]], payload: Any,
                  user: str | None) -> tuple[int, dict[str, str], Any]:
        for m, pat, name in self._routes:
            match = pat.match(path)
            if match and m == method:
                handler: Callable[..., tuple[int, dict[str, str], Any]] = getattr(self, name)
                with self._lock:
                    return handler(query=query, payload=payload, user=user, **match.groupdict())
        return self._not_found()

    @staticmethod
    def _not_found() -> tuple[int, dict[str, str], Any]:
        return 404, {}, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}

    def _repo_or_404(self, repo: str) -> dict[str, Any] | None:
        return self.repos.get(repo.lower())

    # --- pagination ------------------------------------------------------------------------
    def _page(self, path: str, query: dict[str, list[str]], items: list[Any]) -> tuple[list[Any], dict[str, str]]:
        per_page = max(1, min(100, int(query.get("per_page", ["30"])[0] or 30)))
        page = max(1, int(query.get("page", ["1"])[0] or 1))
        last = max(1, (len(items) + per_page - 1) // per_page)
        chunk = items[(page - 1) * per_page: page * per_page]

        def link(p: int) -> str:
            q = {k: v[-1] for k, v in query.items()}
            q.update(page=str(p), per_page=str(per_page))
            return f"<{self.url}{path}?{urllib.parse.urlencode(q)}>"

        rels = []
        if page < last:
            rels += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
        if page > 1:
            rels += [f'{link(1)}; rel="first"', f'{link(page - 1)}; rel="prev"']
        return chunk, ({"Link": ", ".join(rels)} if rels else {})

    # --- REST handlers -----------------------------------------------------------------------
    def _get_rate_limit(self, **_: Any) -> tuple[int, dict[str, str], Any]:
        resources = {k: b.as_dict() for k, b in self.rate.items()}
        return 200, {}, {"resources": resources, "rate": resources["core"]}

    def _get_user(self, user: str | None, **_: Any) -> tuple[int, dict[str, str], Any]:
        if user is None:
            return 401, {}, {"message": "Requires authentication", "documentation_url": DOCS, "status": "401"}
        return 200, {}, self._user(user)

    def _get_repo(self, repo: str, **_: Any) -> tuple[int, dict[str, str], Any]:
        r = self._repo_or_404(repo)
        if r is None:
            return self._not_found()
        r["open_issues_count"] = sum(1 for i in self.issues[repo.lower()].values() if i["state"] == "open")
        return 200, {}, r

    def _list_issues(self, repo: str, query: dict[str, list[str]], **_: Any) -> tuple[int, dict[str, str], Any]:
        if self._repo_or_404(repo) is None:
            return self._not_found()
        state = query.get("state", ["open"])[0]
        sort = query.get("sort", ["created"])[0]
        direction = query.get("direction", ["desc"])[0]
        items = list(self.issues[repo.lower()].values())
        if state in ("open", "closed"):
            items = [i for i in items if i["state"] == state]
        if "since" in query:
            try:
                since = parse_iso(query["since"][0])
            except ValueError:
                return 422, {}, {"message": "Validation Failed", "errors": [
                    {"resource": "Issue", "field": "since", "code": "invalid"}], "documentation_url": DOCS}
            items = [i for i in items if parse_iso(i["updated_at"]) >= since]
        if query.get("creator", [""])[0]:
            items = [i for i in items if i["user"]["login"].lower() == query["creator"][0].lower()]
        if "labels" in query and query["labels"][0]:
            wanted = set(query["labels"][0].split(","))
            items = [i for i in items if wanted <= {lb["name"] for lb in i["labels"]}]
        key = {"created": "created_at", "updated": "updated_at", "comments": "comments"}.get(sort, "created_at")
        items.sort(key=lambda i: (i[key], i["number"]), reverse=direction != "asc")
        chunk, hdrs = self._page(f"/repos/{self.repos[repo.lower()]['full_name']}/issues", query, items)
        return 200, hdrs, chunk

    def _get_issue(self, repo: str, number: str, **_: Any) -> tuple[int, dict[str, str], Any]:
        if self._repo_or_404(repo) is None or int(number) not in self.issues[repo.lower()]:
            return self._not_found()
        return 200, {}, self.issues[repo.lower()][int(number)]

    def _list_comments(self, repo: str, number: str, query: dict[str, list[str]], **_: Any) -> tuple[int, dict[str, str], Any]:
        if self._repo_or_404(repo) is None or int(number) not in self.issues[repo.lower()]:
            return self._not_found()
        items = list(self.comments[(repo.lower(), int(number))])
        if "since" in query:
            since = parse_iso(query["since"][0])
            items = [c for c in items if parse_iso(c["updated_at"]) >= since]
        full = self.repos[repo.lower()]["full_name"]
        chunk, hdrs = self._page(f"/repos/{full}/issues/{number}/comments", query, items)
        return 200, hdrs, chunk

    def _create_issue(self, repo: str, payload: Any, user: str | None, **_: Any) -> tuple[int, dict[str, str], Any]:
        if self._repo_or_404(repo) is None:
            return self._not_found()
        if user is None:
            return 401, {}, {"message": "Requires authentication", "documentation_url": DOCS, "status": "401"}
        if not isinstance(payload, dict) or not str(payload.get("title") or "").strip():
            return 422, {}, {"message": "Validation Failed", "errors": [
                {"resource": "Issue", "code": "missing_field", "field": "title"}], "documentation_url": DOCS}
        issue = self.add_issue(repo, title=str(payload["title"]), body=payload.get("body"),
                               labels=[str(x) for x in payload.get("labels") or []], user=user)
        issue["author_association"] = "NONE"
        return 201, {"Location": issue["url"]}, issue

    def _create_comment(self, repo: str, number: str, payload: Any, user: str | None,
                        **_: Any) -> tuple[int, dict[str, str], Any]:
        if self._repo_or_404(repo) is None or int(number) not in self.issues[repo.lower()]:
            return self._not_found()
        if user is None:
            return 401, {}, {"message": "Requires authentication", "documentation_url": DOCS, "status": "401"}
        if not isinstance(payload, dict) or "body" not in payload:
            return 422, {}, {"message": "Validation Failed", "documentation_url": DOCS}
        comment = self.add_comment(repo, int(number), str(payload["body"]), user=user)
        return 201, {"Location": comment["url"]}, comment

    def _get_permission(self, repo: str, login: str, **_: Any) -> tuple[int, dict[str, str], Any]:
        # The path's user is ``login``: ``user`` is the authenticated caller every handler gets.
        r = self._repo_or_404(repo)
        if r is None:
            return self._not_found()
        user = login
        perm = self.permissions.get((repo.lower(), user.lower()), "none" if r["private"] else "read")
        role = {"maintain": "maintain", "triage": "triage"}.get(perm, perm)
        legacy = {"maintain": "write", "triage": "read"}.get(perm, perm)
        return 200, {}, {"permission": legacy, "role_name": role, "user": self._user(user)}

    # --- search ----------------------------------------------------------------------------
    def _search_issues(self, query: dict[str, list[str]], **_: Any) -> tuple[int, dict[str, str], Any]:
        q = query.get("q", [""])[0]
        if not q.strip():
            return 422, {}, {"message": "Validation Failed", "errors": [
                {"resource": "Search", "field": "q", "code": "missing"}], "documentation_url": DOCS}
        try:
            tokens = shlex.split(q)
        except ValueError:  # an unbalanced quote: GitHub searches the words anyway
            tokens = q.replace('"', " ").split()
        phrases = re.findall(r'"([^"]*)"', q)
        repos: list[str] = []
        kind = state = None
        words: list[str] = []
        for tok in tokens:
            name, _, value = tok.partition(":")
            if tok in phrases:
                continue
            if name == "repo" and value:
                repos.append(value.lower())
            elif name in ("is", "type") and value in ("issue", "pr", "pull-request"):
                kind = "pr" if value != "issue" else "issue"
            elif name in ("is", "state") and value in ("open", "closed"):
                state = value
            elif name == "in" and value:
                continue
            else:
                words.append(tok.lower())
        hits = []
        for key, issues in self.issues.items():
            if repos and key not in repos:
                continue
            for issue in issues.values():
                is_pr = "pull_request" in issue
                if kind == "pr" and not is_pr or kind == "issue" and is_pr:
                    continue
                if state and issue["state"] != state:
                    continue
                text = " ".join([issue["title"] or "", issue["body"] or ""] +
                                [c["body"] for c in self.comments.get((key, issue["number"]), [])]).lower()
                text_words = set(re.findall(r"[\w.]+", text))
                # GitHub matches phrases on word boundaries: "t14" does not hit "t140".
                if (all(re.search(rf"(?<!\w){re.escape(p.lower())}(?!\w)", text) for p in phrases)
                        and all(w in text_words or w in text for w in words)):
                    hits.append({**issue, "score": 1.0})
        hits.sort(key=lambda i: i["updated_at"], reverse=True)
        chunk, hdrs = self._page("/search/issues", query, hits)
        return 200, hdrs, {"total_count": len(hits), "incomplete_results": False, "items": chunk}

    # --- GraphQL ---------------------------------------------------------------------------
    def _graphql(self, payload: Any, user: str | None, **_: Any) -> tuple[int, dict[str, str], Any]:
        if user is None:
            return 401, {}, {"message": "This endpoint requires you to be authenticated.",
                             "documentation_url": "https://docs.github.com/graphql/guides/forming-calls-with-graphql#authenticating-with-graphql"}
        if not isinstance(payload, dict) or not isinstance(payload.get("query"), str):
            return 400, {}, {"message": "Problems parsing JSON", "documentation_url": DOCS}
        query = payload["query"]
        variables = payload.get("variables") or {}
        if "addDiscussionComment" in query:
            args = _mutation_input(query, variables, ("discussionId", "body"))
            d = self.discussions.get(str(args.get("discussionId")))
            if d is None:
                return 200, {}, _gql_not_found(["addDiscussionComment"], args.get("discussionId"))
            comment = self.add_discussion_comment(d.node_id, str(args.get("body", "")), author=user)
            return 200, {}, {"data": {"addDiscussionComment": {"clientMutationId": None,
                                                                "comment": self._gql_comment(comment, user)}}}
        if "updateDiscussionComment" in query:
            args = _mutation_input(query, variables, ("commentId", "body"))
            for d in self.discussions.values():
                for c in d.comments:
                    if c["id"] == args.get("commentId"):
                        if c["author"]["login"] != user:
                            return 200, {}, {"data": {"updateDiscussionComment": None}, "errors": [
                                {"type": "FORBIDDEN", "path": ["updateDiscussionComment"],
                                 "message": f"{user} does not have permission to update this comment."}]}
                        c["body"] = str(args.get("body", ""))
                        return 200, {}, {"data": {"updateDiscussionComment": {
                            "clientMutationId": None, "comment": self._gql_comment(c, user)}}}
            return 200, {}, _gql_not_found(["updateDiscussionComment"], args.get("commentId"))
        if re.search(r"\bnode\s*\(", query):
            node_id = variables.get("id") or variables.get("nodeId") or variables.get("discussionId")
            if node_id is None:
                m = re.search(r'\bnode\s*\(\s*id\s*:\s*"([^"]+)"', query)
                node_id = m.group(1) if m else None
            d = self.discussions.get(str(node_id))
            if d is None:
                return 200, {}, {"data": {"node": None}, **_gql_not_found(["node"], node_id)}
            return 200, {}, {"data": {"node": self._gql_discussion(d, user)}}
        if re.search(r"\bdiscussion\s*\(", query):
            number = variables.get("number")
            if number is None:
                m = re.search(r"\bdiscussion\s*\(\s*number\s*:\s*(\d+)", query)
                number = int(m.group(1)) if m else None
            for d in self.discussions.values():
                if d.number == number:
                    return 200, {}, {"data": {"repository": {"discussion": self._gql_discussion(d, user)}}}
            return 200, {}, {"data": {"repository": {"discussion": None}}, **_gql_not_found(
                ["repository", "discussion"], number)}
        if re.search(r"\bviewer\b", query):
            return 200, {}, {"data": {"viewer": {"login": user}}}
        return 200, {}, {"errors": [{"message": "fakegithub: query not supported", "locations": []}]}

    @staticmethod
    def _gql_comment(c: dict[str, Any], viewer: str | None) -> dict[str, Any]:
        return {"id": c["id"], "body": c["body"], "url": c["url"], "createdAt": c["createdAt"],
                "author": {"login": c["author"]["login"]}, "viewerDidAuthor": c["author"]["login"] == viewer}

    def _gql_discussion(self, d: Discussion, viewer: str | None) -> dict[str, Any]:
        nodes = [self._gql_comment(c, viewer) for c in d.comments]
        return {"__typename": "Discussion", "id": d.node_id, "number": d.number, "title": d.title, "body": d.body,
                "url": f"https://github.com/{d.repo}/discussions/{d.number}",
                "createdAt": d.created_at, "updatedAt": d.updated_at, "lastEditedAt": d.last_edited_at,
                "includesCreatedEdit": bool(d.edits),
                "userContentEdits": {"totalCount": len(d.edits), "nodes": list(d.edits),
                                     "pageInfo": {"hasNextPage": False, "endCursor": None}},
                "comments": {"totalCount": len(nodes), "nodes": nodes,
                             "pageInfo": {"hasNextPage": False, "endCursor": None}}}


def _mutation_input(query: str, variables: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The mutation's input, whether passed as ``$input``, as separate variables, or inline."""
    if isinstance(variables.get("input"), dict):
        return dict(variables["input"])
    args = {n: variables[n] for n in names if n in variables}
    for n in names:
        if n not in args:
            m = re.search(rf'\b{n}\s*:\s*("(?:[^"\\]|\\.)*")', query)
            if m:
                args[n] = json.loads(m.group(1))
            else:
                m = re.search(rf"\b{n}\s*:\s*\$(\w+)", query)
                if m and m.group(1) in variables:
                    args[n] = variables[m.group(1)]
    return args


def _gql_not_found(path: list[str], node_id: Any) -> dict[str, Any]:
    return {"errors": [{"type": "NOT_FOUND", "path": path,
                        "message": f"Could not resolve to a node with the global id of '{node_id}'"}]}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGitHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, out_headers, out = self.fake.handle(self.command, self.path, headers, body)
        if status == 0:  # fault injection: hang up without a response
            self.close_connection = True
            return
        data = b"" if out is None else json.dumps(out).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in out_headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve
