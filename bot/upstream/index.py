"""The local issue index: SQLite with FTS5 (embedded, no server).

One row per issue or PR of the indexed repositories, with what a Signature has (exception
type, normalised message, library frames) extracted from any traceback in the body by the
reducer's own parser, plus what says it was fixed ("Fixes #N", "fixed in v1.14").

Writes are transactions: an import is all-or-nothing; a sync commits page by page together
with its watermark (``since`` for the next sync), so an interrupted sync leaves an index that
is complete up to that watermark and resumes from it, never a half-written page.
"""
from __future__ import annotations

import json
import re
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from bot.targets import owner_packages, package_targets, stack_packages
from reducer.errors import ExitCode, ReprobotError
from reducer.failure.normalize import normalize_message
from reducer.failure.signature import library_frames
from reducer.failure.tracebacks import parse_tracebacks

SCHEMA_VERSION = 1
MAX_BODY = 65_536
MAX_THREAD = 32_768
DB_ENV = "REPROBOT_INDEX_DB"
_REPO_NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS repos (
    repo TEXT PRIMARY KEY,
    last_sync TEXT,           -- watermark: max updated_at committed; the next sync's `since`
    synced_at TEXT
);
CREATE TABLE IF NOT EXISTS issues (
    id INTEGER PRIMARY KEY,
    repo TEXT NOT NULL,
    number INTEGER NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    thread TEXT NOT NULL DEFAULT '',      -- comment bodies, for fix references only
    state TEXT NOT NULL,
    state_reason TEXT,
    is_pr INTEGER NOT NULL DEFAULT 0,
    merged INTEGER NOT NULL DEFAULT 0,
    labels TEXT NOT NULL DEFAULT '[]',
    created_at TEXT, updated_at TEXT, closed_at TEXT,
    url TEXT NOT NULL,
    exc_type TEXT,
    message TEXT,                         -- normalised (devices too), for exact matching
    error_line TEXT,                      -- "Type: message" as written, one line
    frames TEXT NOT NULL DEFAULT '[]',    -- library frames "pkg/file.py:func", innermost first
    fixes TEXT NOT NULL DEFAULT '[]',     -- for PRs: ["owner/repo#N"] it closes
    mentions TEXT NOT NULL DEFAULT '[]',  -- for PRs: every "owner/repo#N" its title/body names
    fixed_by TEXT NOT NULL DEFAULT '[]',  -- PR refs the thread names as the fix
    fixed_in TEXT NOT NULL DEFAULT '[]',  -- [[package|null, version]] the thread names
    versions TEXT NOT NULL DEFAULT '{}',  -- package -> version the report mentions
    UNIQUE (repo, number)
);
CREATE INDEX IF NOT EXISTS issues_message ON issues (message);
CREATE TABLE IF NOT EXISTS issue_frames (
    issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    frame TEXT NOT NULL,
    depth INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS issue_frames_frame ON issue_frames (frame);
CREATE INDEX IF NOT EXISTS issue_frames_issue ON issue_frames (issue_id);
CREATE VIRTUAL TABLE IF NOT EXISTS issues_fts USING fts5(
    title, body, content='issues', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS issues_ai AFTER INSERT ON issues BEGIN
    INSERT INTO issues_fts(rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER IF NOT EXISTS issues_ad AFTER DELETE ON issues BEGIN
    INSERT INTO issues_fts(issues_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;
CREATE TRIGGER IF NOT EXISTS issues_au AFTER UPDATE ON issues BEGIN
    INSERT INTO issues_fts(issues_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
    INSERT INTO issues_fts(rowid, title, body) VALUES (new.id, new.title, new.body);
END;
"""


def default_db_path() -> Path:
    """``$REPROBOT_INDEX_DB``, else the user's cache directory (platformdirs)."""
    import os

    env = os.environ.get(DB_ENV)
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("reprobot")) / "issues.sqlite3"


# --- extraction ----------------------------------------------------------------------------------

_ERROR_LINE = re.compile(r"^\s*(?:E\s+)?(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt))"
                         r"\s*:\s*(?P<msg>\S.*?)\s*$", re.MULTILINE)
_CLOSING = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+"
                      r"(?:https://github\.com/(?P<urepo>[\w.-]+/[\w.-]+)/(?:issues|pull)/(?P<unum>\d+)"
                      r"|(?P<repo>[\w.-]+/[\w.-]+)?#(?P<num>\d+))", re.IGNORECASE)
_FIXED_BY = re.compile(r"\b(?:fixed|resolved|addressed|solved|closed)\b[^\n#]{0,60}?\b(?:by|in|with|via)\s+"
                       r"(?:(?:the\s+)?(?:PR|pull request)\s*)?"
                       r"(?:https://github\.com/(?P<urepo>[\w.-]+/[\w.-]+)/pull/(?P<unum>\d+)"
                       r"|(?P<repo>[\w.-]+/[\w.-]+)?#(?P<num>\d+))", re.IGNORECASE)
_MENTION = re.compile(r"(?:https://github\.com/(?P<urepo>[\w.-]+/[\w.-]+)/(?:issues|pull)/(?P<unum>\d+)"
                      r"|(?<![\w/])(?P<repo>[\w.-]+/[\w.-]+)?#(?P<num>\d+)\b)")
# Every package routing can name as an owner (the targets' and the ones filed elsewhere).
_PACKAGES = owner_packages()
_VER = r"v?(?P<ver>\d+\.\d+(?:\.\d+)?(?:\.?(?:dev|rc|post)\d*)?)"
# Only fix verbs: "released in v0.48.0" names where a regression came from as often as a fix.
_FIXED_IN = re.compile(r"\b(?:fixed|resolved|solved|landed)\s+"
                       r"(?:(?:as\s+)?of|in|since|with|from)\s+(?:the\s+)?(?:release\s+)?"
                       rf"(?:(?P<pkg>{'|'.join(_PACKAGES)})(?:\s*==\s*|\s+))?(?:version\s+)?{_VER}\b",
                       re.IGNORECASE)
# "- `transformers` version: 4.35.2", "peft==0.6.2", "PyTorch version (GPU?): 2.0.1+cu117"
_MENTIONED_VERSION = re.compile(rf"\b(?P<pkg>{'|'.join(_PACKAGES)}|pytorch)`?(?:\s+version)?(?:\s*\([^)]*\))?"
                                rf"\s*(?:[:=]=?|\s)\s*{_VER}", re.IGNORECASE)


@lru_cache(maxsize=8)
def _package_names(packages: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(rf"\b({'|'.join(map(re.escape, packages))})\b", re.IGNORECASE)


def _package_repos() -> dict[str, str]:
    """package -> repository for the stack's targets (torch's name is too common in a thread to
    say that a bare #N after it is a pytorch/pytorch number)."""
    ours = stack_packages()
    return {pkg: t.repo for pkg, t in package_targets().items() if pkg in ours}


def _ref(m: re.Match[str], default_repo: str) -> str:
    # "fixed in accelerate 1.14 by #3976": a bare #N after a package's name is that package's.
    repos = _package_repos()
    named = _package_names(tuple(repos)).search(m.group(0))
    if named and not (m.group("urepo") or m.group("repo")):
        default_repo = repos[named.group(1).lower()]
    repo = m.group("urepo") or m.group("repo") or default_repo
    num = m.group("unum") or m.group("num")
    return f"{repo}#{num}"


@dataclass
class Extracted:
    exc_type: str | None = None
    message: str | None = None
    error_line: str | None = None
    frames: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    mentions: list[str] = field(default_factory=list)
    fixed_by: list[str] = field(default_factory=list)
    fixed_in: list[tuple[str | None, str]] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)


def normalized(message: str) -> str:
    """How messages are compared in the index: device indices too are placeholders."""
    return normalize_message(message, keep_devices=False)


def extract(title: str, body: str, thread: str, repo: str, is_pr: bool) -> Extracted:
    """What the Signature has, from an issue's text, by the reducer's own traceback parser."""
    out = Extracted()
    records = [r for r in parse_tracebacks(body or "") if r.kind == "exception"]
    with_frames = [r for r in records if r.frames]
    record = (with_frames or records or [None])[-1]
    if record is not None:
        out.exc_type = record.exc_type
        out.message = normalized(record.message)
        out.error_line = f"{record.exc_type}: {record.message.strip().splitlines()[0] if record.message.strip() else ''}"
        out.frames = library_frames(record)
    else:
        # No traceback: an "XxxError: message" line in the body or the title is still a fact.
        for text in (body or "", title):
            m = _ERROR_LINE.search(text)
            if m:
                out.exc_type, msg = m.group("type"), m.group("msg")
                out.message = normalized(msg)
                out.error_line = f"{out.exc_type}: {msg}"[:300]
                break
    text = "\n".join([title, body or "", thread or ""])
    if is_pr:
        out.fixes = list(dict.fromkeys(_ref(m, repo) for m in _CLOSING.finditer(title + "\n" + (body or ""))))
        out.mentions = list(dict.fromkeys(_ref(m, repo) for m in _MENTION.finditer(title + "\n" + (body or ""))))
    else:
        out.fixed_by = list(dict.fromkeys(_ref(m, repo) for m in _FIXED_BY.finditer(text)))
    out.fixed_in = list(dict.fromkeys((m.group("pkg").lower() if m.group("pkg") else None, m.group("ver"))
                                      for m in _FIXED_IN.finditer(text)))
    out.versions = mentioned_versions(body or "")
    if out.error_line:
        out.error_line = out.error_line[:300]
    return out


def mentioned_versions(text: str) -> dict[str, str]:
    """package -> version as a post states them ("Transformers: v5.6.2", "- `peft` version: 0.19.1")."""
    out: dict[str, str] = {}
    fix_spans = [m.span() for m in _FIXED_IN.finditer(text or "")]
    for m in _MENTIONED_VERSION.finditer(text or ""):
        if not any(a <= m.start() < b for a, b in fix_spans):  # "fixed in accelerate 1.14" is no report
            pkg = m.group("pkg").lower()
            out.setdefault("torch" if pkg == "pytorch" else pkg, m.group("ver"))
    return out


# --- GitHub issue objects ------------------------------------------------------------------------

def repo_of(issue: dict[str, Any]) -> str | None:
    """``owner/name`` from an issue object's repository_url or html_url."""
    for key in ("repository_url", "html_url", "url"):
        url = issue.get(key)
        if isinstance(url, str):
            path = urllib.parse.urlparse(url).path
            m = re.search(r"/repos/([^/]+/[^/]+)", path) or re.match(r"^/([^/]+/[^/]+)/(?:issues|pull)/", path)
            if m:
                return m.group(1)
    return None


class BadIssue(ValueError):
    pass


def issue_row(issue: Any, repo: str | None = None, thread: Iterable[str] = ()) -> dict[str, Any]:
    """One GitHub REST issue object -> an index row. Raises BadIssue for a non-issue."""
    if not isinstance(issue, dict):
        raise BadIssue("not a JSON object")
    for key, kind in (("number", int), ("title", str)):
        if not isinstance(issue.get(key), kind) or isinstance(issue.get(key), bool):
            raise BadIssue(f"missing or invalid '{key}'")
    repo = repo or repo_of(issue)
    if not repo or not _REPO_NAME.match(repo):
        raise BadIssue("cannot tell its repository (no repository_url/html_url; pass --repo)")
    state = issue.get("state", "open")
    if state not in ("open", "closed"):
        raise BadIssue(f"invalid state {state!r}")
    body = issue.get("body") or ""
    if not isinstance(body, str):
        raise BadIssue("invalid 'body'")
    is_pr = isinstance(issue.get("pull_request"), dict)
    extra = issue.get("reprobot_thread") or []  # reprobot's own extension: comment bodies
    comments = [c if isinstance(c, str) else str(c.get("body") or "") for c in [*thread, *extra]
                if isinstance(c, (str, dict))]
    thread_text = "\n\n".join(comments)[:MAX_THREAD]
    labels = [lb.get("name") if isinstance(lb, dict) else str(lb) for lb in issue.get("labels") or []]
    facts = extract(issue["title"], body[:MAX_BODY], thread_text, repo, is_pr)
    url = issue.get("html_url") or f"https://github.com/{repo}/{'pull' if is_pr else 'issues'}/{issue['number']}"
    return {
        "repo": repo, "number": issue["number"], "title": issue["title"], "body": body[:MAX_BODY],
        "thread": thread_text, "state": state, "state_reason": issue.get("state_reason"),
        "is_pr": int(is_pr), "merged": int(bool(is_pr and (issue["pull_request"].get("merged_at")))),
        "labels": json.dumps([x for x in labels if x]), "created_at": issue.get("created_at"),
        "updated_at": issue.get("updated_at"), "closed_at": issue.get("closed_at"), "url": url,
        "exc_type": facts.exc_type, "message": facts.message, "error_line": facts.error_line,
        "frames": json.dumps(facts.frames), "fixes": json.dumps(facts.fixes), "mentions": json.dumps(facts.mentions),
        "fixed_by": json.dumps(facts.fixed_by), "fixed_in": json.dumps([list(x) for x in facts.fixed_in]),
        "versions": json.dumps(facts.versions),
    }


# --- the index -----------------------------------------------------------------------------------

@dataclass
class IndexedIssue:
    id: int
    repo: str
    number: int
    title: str
    body: str
    thread: str
    state: str
    state_reason: str | None
    is_pr: bool
    merged: bool
    labels: list[str]
    created_at: str | None
    updated_at: str | None
    closed_at: str | None
    url: str
    exc_type: str | None
    message: str | None
    error_line: str | None
    frames: list[str]
    fixes: list[str]
    mentions: list[str]
    fixed_by: list[str]
    fixed_in: list[tuple[str | None, str]]
    versions: dict[str, str]

    @property
    def ref(self) -> str:
        return f"{self.repo}#{self.number}"

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> IndexedIssue:
        return cls(row["id"], row["repo"], row["number"], row["title"], row["body"], row["thread"], row["state"],
                   row["state_reason"], bool(row["is_pr"]), bool(row["merged"]), json.loads(row["labels"]),
                   row["created_at"], row["updated_at"], row["closed_at"], row["url"], row["exc_type"],
                   row["message"], row["error_line"], json.loads(row["frames"]), json.loads(row["fixes"]),
                   json.loads(row["mentions"]), json.loads(row["fixed_by"]), [tuple(x) for x in json.loads(row["fixed_in"])],
                   json.loads(row["versions"]))


_COLUMNS = ("repo", "number", "title", "body", "thread", "state", "state_reason", "is_pr", "merged", "labels",
            "created_at", "updated_at", "closed_at", "url", "exc_type", "message", "error_line", "frames", "fixes",
            "mentions", "fixed_by", "fixed_in", "versions")


class IssueIndex:
    """The SQLite file. Open with ``IssueIndex.open(path)``; use as a context manager."""

    def __init__(self, conn: sqlite3.Connection, path: Path | None) -> None:
        self.conn = conn
        self.path = path

    @classmethod
    def open(cls, path: str | Path | None = None, *, create: bool = True) -> IssueIndex:
        p = Path(path) if path is not None else default_db_path()
        if not create and not p.is_file():
            raise ReprobotError(f"no issue index at {p}: run `reprobot index import FILE` or "
                                "`reprobot index sync --repo KEY` first", ExitCode.FILE_MISSING)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(p), isolation_level=None, timeout=30)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA journal_mode = WAL")
            index = cls(conn, p)
            index._init_schema()
        except sqlite3.DatabaseError as e:
            raise ReprobotError(f"{p}: not a reprobot issue index ({e})", ExitCode.BAD_INPUT) from None
        except OSError as e:
            raise ReprobotError(f"{p}: cannot open the issue index ({e.strerror})", ExitCode.FILE_MISSING) from None
        return index

    def _init_schema(self) -> None:
        with self.transaction():
            for stmt in _split_sql(SCHEMA):
                self.conn.execute(stmt)
            row = self.conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self.conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(row["value"]) != SCHEMA_VERSION:
                raise ReprobotError(f"{self.path}: index schema {row['value']} is not {SCHEMA_VERSION}; "
                                    "delete it and sync again", ExitCode.BAD_INPUT)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> IssueIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any exception: never half-written."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

    # writes (call inside transaction())
    def upsert(self, row: dict[str, Any]) -> int:
        cols = ", ".join(_COLUMNS)
        marks = ", ".join("?" for _ in _COLUMNS)
        updates = ", ".join(f"{c}=excluded.{c}" for c in _COLUMNS if c not in ("repo", "number"))
        self.conn.execute(f"INSERT INTO issues ({cols}) VALUES ({marks}) "
                          f"ON CONFLICT(repo, number) DO UPDATE SET {updates}", [row[c] for c in _COLUMNS])
        issue_id = self.conn.execute("SELECT id FROM issues WHERE repo=? AND number=?",
                                     (row["repo"], row["number"])).fetchone()["id"]
        self.conn.execute("DELETE FROM issue_frames WHERE issue_id=?", (issue_id,))
        self.conn.executemany("INSERT INTO issue_frames (issue_id, frame, depth) VALUES (?, ?, ?)",
                              [(issue_id, f, d) for d, f in enumerate(json.loads(row["frames"]))])
        return issue_id

    def set_watermark(self, repo: str, last_sync: str | None) -> None:
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.conn.execute("INSERT INTO repos (repo, last_sync, synced_at) VALUES (?, ?, ?) "
                          "ON CONFLICT(repo) DO UPDATE SET last_sync=max(coalesce(repos.last_sync, ''), "
                          "coalesce(excluded.last_sync, '')), synced_at=excluded.synced_at",
                          (repo, last_sync, now))

    # reads
    def set_conditional(self, repo: str, since: str | None, etag: str) -> None:
        """The ETag GitHub gave the first page of a sync from ``since``: asking the same again
        with If-None-Match costs no rate limit when nothing changed (a 304)."""
        self.conn.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                          (f"etag:{repo}", json.dumps({"since": since or "", "etag": etag})))

    def conditional(self, repo: str, since: str | None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (f"etag:{repo}",)).fetchone()
        try:
            saved = json.loads(row["value"]) if row else {}
        except ValueError:
            return None
        return saved.get("etag") if saved.get("since") == (since or "") else None

    def synced_at(self, repo: str) -> str | None:
        row = self.conn.execute("SELECT synced_at FROM repos WHERE repo=?", (repo,)).fetchone()
        return row["synced_at"] or None if row else None

    def last_sync(self, repo: str) -> str | None:
        row = self.conn.execute("SELECT last_sync FROM repos WHERE repo=?", (repo,)).fetchone()
        return row["last_sync"] or None if row else None

    def count(self, repo: str | None = None) -> int:
        if repo:
            return self.conn.execute("SELECT count(*) FROM issues WHERE repo=?", (repo,)).fetchone()[0]
        return self.conn.execute("SELECT count(*) FROM issues").fetchone()[0]

    def repos(self) -> list[dict[str, Any]]:
        # Every repository the index holds issues of, synced or not (seeded issues set no watermark).
        rows = self.conn.execute("SELECT k.repo, r.last_sync, r.synced_at, "
                                 "(SELECT count(*) FROM issues i WHERE i.repo=k.repo) AS n "
                                 "FROM (SELECT repo FROM repos UNION SELECT DISTINCT repo FROM issues) k "
                                 "LEFT JOIN repos r ON r.repo=k.repo ORDER BY k.repo").fetchall()
        return [dict(r) for r in rows]

    def get(self, repo: str, number: int) -> IndexedIssue | None:
        row = self.conn.execute("SELECT * FROM issues WHERE repo=? AND number=?", (repo, number)).fetchone()
        return IndexedIssue.from_row(row) if row else None

    def by_ids(self, ids: Iterable[int]) -> list[IndexedIssue]:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        rows = self.conn.execute(f"SELECT * FROM issues WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall()
        return [IndexedIssue.from_row(r) for r in rows]

    def bm25(self, text: str, limit: int = 50, split: str = "") -> dict[int, float]:
        """Issue id -> relevance (higher is better) by FTS5 bm25() over title (x3) and body.
        ``split``: the text whose identifiers also count by their parts (fts_query)."""
        query = fts_query(text, split=split)
        if not query:
            return {}
        rows = self.conn.execute("SELECT rowid, bm25(issues_fts, 3.0, 1.0) AS rank FROM issues_fts "
                                 "WHERE issues_fts MATCH ? ORDER BY rank LIMIT ?", (query, limit)).fetchall()
        return {r["rowid"]: -float(r["rank"]) for r in rows}

    def with_message(self, message: str) -> list[int]:
        return [r["id"] for r in self.conn.execute("SELECT id FROM issues WHERE message=?", (message,))]

    def with_frames(self, frames: list[str], limit: int = 200) -> dict[int, list[str]]:
        if not frames:
            return {}
        rows = self.conn.execute(f"SELECT issue_id, frame FROM issue_frames WHERE frame IN "
                                 f"({','.join('?' * len(frames))}) LIMIT ?", [*frames, limit * len(frames)])
        out: dict[int, list[str]] = {}
        for r in rows:
            out.setdefault(r["issue_id"], []).append(r["frame"])
        return out

    def prs_fixing(self, ref: str) -> list[IndexedIssue]:
        """PRs in the index whose body says they close ``owner/repo#N``."""
        rows = self.conn.execute("SELECT * FROM issues WHERE is_pr=1 AND fixes LIKE ?",
                                 (f'%"{ref}"%',)).fetchall()
        return [IndexedIssue.from_row(r) for r in rows]

    def prs_mentioning(self, ref: str) -> list[IndexedIssue]:
        """PRs whose title/body names ``owner/repo#N`` (a fix, a proposed fix, a follow-up)."""
        rows = self.conn.execute("SELECT * FROM issues WHERE is_pr=1 AND mentions LIKE ?",
                                 (f'%"{ref}"%',)).fetchall()
        return [IndexedIssue.from_row(r) for r in rows]

    def get_ref(self, ref: str) -> IndexedIssue | None:
        repo, _, num = ref.rpartition("#")
        return self.get(repo, int(num)) if repo and num.isdigit() else None

    def message_share(self, message: str) -> int:
        return self.conn.execute("SELECT count(*) FROM issues WHERE message=?", (message,)).fetchone()[0]


def _split_sql(script: str) -> list[str]:
    """Statements of SCHEMA (triggers contain ';' inside BEGIN...END)."""
    out, buf = [], []
    for line in script.strip().splitlines():
        buf.append(line)
        joined = "\n".join(buf).strip()
        if joined.endswith(";") and (not joined.upper().startswith("CREATE TRIGGER") or joined.endswith("END;")):
            out.append(joined)
            buf = []
    return out


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_STOP = frozenset(["the", "and", "for", "with", "this", "that", "from", "are", "was", "were", "not", "but", "have", "has", "had", "you", "your", "its", "into", "when", "then", "than", "can", "could", "would", "should", "will", "what", "which", "while", "where", "there", "their", "been", "being", "does", "did", "got", "one", "two", "all", "any", "error", "errors", "traceback", "most", "recent", "call", "last", "file", "line", "self", "none", "true", "false", "return"])


def fts_query(text: str, max_terms: int = 40, split: str = "") -> str:
    """An FTS5 OR-query from free text: each distinct word quoted (no FTS syntax leaks).

    The tokenizer splits ``cquantize_blockwise_fp16_nf4`` at each ``_``, so a quoted identifier
    is a phrase that only the same identifier matches. The identifiers of ``split`` (an error
    message) also count by their parts, so ``cquantize_blockwise_fp16_fp4`` is near; a frame's
    function name is not split, as its parts (``create``, ``new``, ``module``) name nothing."""
    words: list[str] = []
    splittable = {w.lower() for w in _WORD.findall(split or "")}
    for w in _WORD.findall(text or ""):
        lw = w.lower()
        parts = ([p for p in lw.split("_") if len(p) >= 3 and p not in _STOP]
                 if lw in splittable and "_" in lw.strip("_") else [])
        for term in [lw, *parts]:
            if term in _STOP or term in words:
                continue
            words.append(term)
        if len(words) >= max_terms:
            break
    return " OR ".join(f'"{w}"' for w in words[:max_terms])


# --- import and sync ---------------------------------------------------------------------------

@dataclass
class ImportStats:
    added: int = 0
    updated: int = 0
    repos: set[str] = field(default_factory=set)


def import_file(index: IssueIndex, path: str | Path, repo: str | None = None) -> ImportStats:
    """Load a JSON list of GitHub REST issue objects, all or nothing."""
    p = Path(path)
    if not p.is_file():
        raise ReprobotError(f"{p}: no such file", ExitCode.FILE_MISSING)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ReprobotError(f"{p}: not UTF-8 JSON", ExitCode.BAD_INPUT) from None
    except json.JSONDecodeError as e:
        raise ReprobotError(f"{p}: not valid JSON ({e.msg} at line {e.lineno})", ExitCode.BAD_INPUT) from None
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        data = data["items"]  # a saved search result
    if not isinstance(data, list):
        raise ReprobotError(f"{p}: expected a JSON list of GitHub issue objects", ExitCode.BAD_INPUT)
    if repo is not None and not _REPO_NAME.match(repo):
        raise ReprobotError(f"--repo {repo!r}: expected OWNER/NAME", ExitCode.USAGE)
    return import_objects(index, data, repo, source=str(p))


def import_objects(index: IssueIndex, data: list[Any], repo: str | None = None, *, source: str = "input",
                   watermark: bool = True) -> ImportStats:
    """Upsert GitHub REST issue objects, all or nothing. ``watermark=False`` for a partial set
    (the bundled known issues): a later sync must still fetch everything it holds nothing of."""
    rows = []
    for i, item in enumerate(data):
        try:
            rows.append(issue_row(item, repo))
        except BadIssue as e:
            raise ReprobotError(f"{source}: item {i} is not a GitHub issue object ({e}); nothing imported",
                                ExitCode.BAD_INPUT) from None
    stats = ImportStats()
    with index.transaction():
        for row in rows:
            existed = index.get(row["repo"], row["number"]) is not None
            index.upsert(row)
            stats.updated += existed
            stats.added += not existed
            stats.repos.add(row["repo"])
        for r in (stats.repos if watermark else ()):
            # A snapshot's watermark is its newest updated_at, so a later sync continues from it.
            latest = max((row["updated_at"] or "" for row in rows if row["repo"] == r), default="") or None
            index.set_watermark(r, latest)
    return stats


@dataclass
class SyncStats:
    repo: str
    since: str | None
    fetched: int = 0
    pages: int = 0
    comments_fetched: int = 0
    watermark: str | None = None
    not_modified: bool = False      # GitHub answered 304 to the first page: nothing new


def _next_link(headers: dict[str, Any]) -> str | None:
    import requests

    link = next((v for k, v in headers.items() if k.lower() == "link"), None)
    if not link:
        return None
    for part in requests.utils.parse_header_links(link):
        if part.get("rel") == "next":
            return part.get("url")
    return None


def sync(index: IssueIndex, repo: str, *, client: Any, full: bool = False, comments: bool = True,
         comment_budget: int = 200, per_page: int = 100,
         progress: Callable[[SyncStats], None] | None = None) -> SyncStats:
    """Fetch issues and PRs updated since the last sync (sort=updated, ascending), page by
    page through PyGithub's requester, each page committed with its watermark."""
    from bot.github_api import github_errors

    if not _REPO_NAME.match(repo):
        raise ReprobotError(f"--repo {repo!r}: expected OWNER/NAME", ExitCode.USAGE)
    with github_errors(f"repository {repo}"):
        gh_repo = client.get_repo(repo)  # 404 here: unknown repository
    full_name = gh_repo.full_name
    since = None if full else index.last_sync(full_name)
    stats = SyncStats(full_name, since)
    params: dict[str, Any] | None = {"state": "all", "sort": "updated", "direction": "asc", "per_page": per_page}
    if since:
        params["since"] = since
    url: str | None = f"{gh_repo.url}/issues"
    requester = client.requester
    budget = comment_budget
    etag = index.conditional(full_name, since)
    first = True
    while url:
        with github_errors(f"sync {full_name}"):
            conditional = {"If-None-Match": etag} if first and etag else None
            headers, page = requester.requestJsonAndCheck("GET", url, params, conditional)
            if conditional and page is None:
                stats.not_modified = True       # 304: nothing updated since the last sync
                with index.transaction():
                    index.set_watermark(full_name, since)
                return stats
            if first:
                tag = next((v for k, v in headers.items() if k.lower() == "etag"), None)
                if tag:
                    with index.transaction():
                        index.set_conditional(full_name, since, tag)
                first = False
            if not isinstance(page, list):
                raise ReprobotError(f"sync {full_name}: GitHub answered an unexpected payload", ExitCode.NETWORK)
            rows = []
            for item in page:
                thread: list[str] = []
                if (comments and budget > 0 and item.get("state") == "closed" and item.get("comments")
                        and not item.get("pull_request")):
                    thread = _comments(requester, item, full_name)
                    budget -= 1
                    stats.comments_fetched += 1
                try:
                    rows.append(issue_row(item, full_name, thread))
                except BadIssue:
                    continue  # GitHub sent something that is not an issue: skip, never crash
        with index.transaction():
            for row in rows:
                index.upsert(row)
            page_mark = max((r["updated_at"] or "" for r in rows), default="") or None
            if page_mark:
                index.set_watermark(full_name, page_mark)
                stats.watermark = page_mark
        stats.fetched += len(rows)
        stats.pages += 1
        if progress:
            progress(stats)
        url, params = _next_link(headers), None  # the next link carries the query
    if stats.watermark is None:
        with index.transaction():
            index.set_watermark(full_name, since)
    return stats


def _comments(requester: Any, item: dict[str, Any], repo: str) -> list[str]:
    url: str | None = item.get("comments_url") or f"/repos/{repo}/issues/{item['number']}/comments"
    params: dict[str, Any] | None = {"per_page": 100}
    out: list[str] = []
    pages = 0
    while url and pages < 3:  # the first 300 comments say whether it was fixed
        headers, page = requester.requestJsonAndCheck("GET", url, params)
        out.extend(str(c.get("body") or "") for c in page if isinstance(c, dict))
        url, params = _next_link(headers), None
        pages += 1
    return out
