"""The publish job's reading of the artifact and the reply it renders.

Every byte of the artifact is untrusted (the reproduce job ran the public's code): files are
read only if they are plain files under a size cap, JSON is shape-checked field by field, every
text is scrubbed (bot/scrub.py) and then made inert as markdown:
- code goes in a fence longer than any backtick run inside it, one-line texts are escaped
  prose, by the same functions as the drafts (bot/issue/markdown.py): a title cannot ping
  people, reference an issue, open a tag, or close the reply's ``<details>``;
- links are kept only when they are github.com issue/PR/new-issue links of a well-formed repo;
- the hidden marker that identifies our reply is stripped from anything quoted.
The draft goes in a collapsed ``<details>`` as a markdown code block: quoted, it cannot mention
the maintainers it lists under "who can help" from inside a discussion.
"""
from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from bot.issue import markdown
from bot.issue.hazards import find_hazards, hazard_context, said_before_code
from bot.issue.templating import environment, templates_dir
from bot.action.result import REPRO_SUBDIR, SILENT, ActionResult
from bot.targets import REPO_KEYS, target_for_repo
from reducer.failure.signature import Signature

TEMPLATES_DIR = templates_dir()
TEMPLATE = "action_reply.md.j2"
MARKER_PREFIX = "reprobot:discussion="
# GitHub refuses comment bodies over 65,536 characters; the parts are capped to stay under.
MAX_REPLY = 60_000
MAX_CODE = 20_000
MAX_DRAFT = 25_000
MAX_FILE = 2 * 1024 * 1024
MAX_RELATED = 5
MAX_REASONS = 5
_REPO = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_ISSUE_URL = re.compile(r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/(?:issues|pull)/\d{1,9}$")
_NEW_ISSUE_URL = re.compile(r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/issues/new\?[^\s<>\"'`]*$")


def marker(node_id: str) -> str:
    return f"<!-- {MARKER_PREFIX}{node_id} -->"


# --- making untrusted text inert -------------------------------------------------------------

def clean(text: str) -> str:
    """Scrubbed of secrets and private details, with our marker neutralised."""
    from bot.scrub import scrub

    text = scrub(text).text
    return text.replace(MARKER_PREFIX, "reprobot: discussion=").replace("\x00", "")


def md_text(text: str, limit: int = 300) -> str:
    """One line of plain text, safe to put anywhere in markdown."""
    return markdown.inline(clean(text), limit)


def code_span(text: str, limit: int = 400) -> str:
    return markdown.code_span(clean(text), limit)


def fence(text: str, lang: str = "", limit: int = MAX_CODE) -> str:
    body = clean(text)
    if len(body) > limit:
        body = body[:limit].rstrip() + "\n# … (cut: too long for a reply; the artifact has the whole file)"
    return markdown.fence(body, lang)


# --- reading the artifact --------------------------------------------------------------------

def read_text(path: Path, limit: int = MAX_FILE) -> str | None:
    """A plain file's text, or None: links, folders, oversize files and unreadable bytes are skipped."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


def read_json(path: Path, limit: int = MAX_FILE) -> Any:
    text = read_text(path, limit)
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _str(d: Any, key: str) -> str | None:
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, str) else None


@dataclass
class Size:
    lines: int
    chars: int

    @classmethod
    def of(cls, text: str) -> "Size":
        return cls(len(text.splitlines()), len(text))


@dataclass
class Related:
    label: str      # "huggingface/peft#123"
    title: str
    url: str
    state: str
    note: str


@dataclass
class Draft:
    repo: str
    title: str
    body: str
    url: str | None
    url_complete: bool


@dataclass
class Reply:
    status: str
    node_id: str
    result: ActionResult
    code: str | None = None               # the repro, fenced
    minimal: bool = False                 # True: the code is the reduced repro, not the original
    signature: str | None = None          # one line, as a code span
    signature_id: str | None = None
    original: Size | None = None
    reduced: Size | None = None
    runs: int | None = None
    related: list[Related] = field(default_factory=list)
    target: str | None = None
    reasons: list[str] = field(default_factory=list)
    cross_links: list[str] = field(default_factory=list)
    verdict: str = ""                     # route's one-line verdict, shown when there is no target
    draft: Draft | None = None
    draft_fenced: str | None = None
    hazards: dict[str, Any] | None = None  # what not to run blind in the code shown (templates/partials/hazards.md.j2)
    requirements: list[str] = field(default_factory=list)
    detail: str = ""
    why: str = ""
    syntax_error: str = ""
    hidden_why: str = ""                  # where the post's hidden Python blocks are (never run)
    attachment: str = ""                  # the attached file that ran, as a code span
    # The post this reply is about (bot/action/freshness.py), set by publish from the event and
    # from GitHub, never from the artifact: the body's sha256 as labelled (what ran), as shown
    # now when they differ, and when the post was last edited.
    body_sha256: str = ""
    current_sha256: str = ""
    last_edited_at: str = ""

    @property
    def body_short(self) -> str:
        return self.body_sha256[:12]

    @property
    def current_short(self) -> str:
        return self.current_sha256[:12]


def _signature(repro: Path) -> tuple[str | None, str | None, int | None]:
    data = read_json(repro / "signature.json")
    sig = data.get("signature") if isinstance(data, dict) else None
    try:
        if not isinstance(sig, dict) or not isinstance(sig.get("exc_type"), str):
            return None, None, None
        frames = sig.get("frames") or []
        if not isinstance(frames, list) or not all(isinstance(f, str) for f in frames):
            frames = []
        message = sig.get("message") if isinstance(sig.get("message"), str) else None
        s = Signature(sig["exc_type"][:200], message, tuple(f[:200] for f in frames[:10]))
    except (TypeError, ValueError):
        return None, None, None
    runs = data.get("runs")
    # The stored id names the repro folder and the draft's marker; it was computed before the
    # message was scrubbed, so it is kept when well-formed rather than recomputed.
    stored = sig.get("id")
    sig_id = stored if isinstance(stored, str) and re.fullmatch(r"[0-9a-f]{10}", stored) else s.id
    return s.one_line(), sig_id, len(runs) if isinstance(runs, list) else None


def _runs(repro: Path, first: int | None) -> int | None:
    red = read_json(repro / "reduction.json")
    n = red.get("runs") if isinstance(red, dict) else None
    if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 10 ** 7:
        return n + (first or 0)
    return first


def _related(repro: Path) -> list[Related]:
    data = read_json(repro / "related.json")
    items = data.get("results") if isinstance(data, dict) else None
    out: list[Related] = []
    for it in items if isinstance(items, list) else []:
        repo, url, number = _str(it, "repo"), _str(it, "url"), it.get("number") if isinstance(it, dict) else None
        if not (repo and _REPO.match(repo) and url and _ISSUE_URL.match(url) and isinstance(number, int)):
            continue
        if not url.startswith(f"https://github.com/{repo}/"):
            continue
        state = _str(it, "state") or ""
        fixed = _str(it, "likely_fixed_in")
        note = _str(it, "reason") or ""
        if fixed:
            note = f"{note}; likely fixed in {fixed}" if note else f"likely fixed in {fixed}"
        out.append(Related(f"{repo}#{number}", md_text(_str(it, "title") or "", 140), url,
                           md_text(state if state in ("open", "closed") else "", 10), md_text(note, 160)))
        if len(out) >= MAX_RELATED:
            break
    return out


def _route(repro: Path) -> tuple[str | None, list[str], list[str]]:
    data = read_json(repro / "route.json")
    if not isinstance(data, dict):
        return None, [], []
    target = _str(data, "target")
    if not target or not _REPO.match(target):
        return None, [], []
    reasons: list[str] = []
    for r in data.get("ranked") or []:
        if isinstance(r, dict) and r.get("repo") == target and isinstance(r.get("reasons"), list):
            reasons = [md_text(x, 200) for x in r["reasons"] if isinstance(x, str)][:MAX_REASONS]
            break
    links = [x for x in data.get("cross_links") or [] if isinstance(x, str) and _REPO.match(x) and x != target]
    return target, reasons, links[:5]


def _draft(repro: Path, target: str | None) -> Draft | None:
    routed = target_for_repo(target)
    keys = ([routed.key] if routed else []) + list(REPO_KEYS)
    for key in dict.fromkeys(keys):
        body = read_text(repro / f"draft-{key}.md")
        if body is None:
            continue
        meta = read_json(repro / f"draft-{key}.json")
        repo = _str(meta, "repo") or target or ""
        url = _str(meta, "url")
        if url is not None and not (len(url) <= 8000 and _NEW_ISSUE_URL.match(url)
                                    and url.startswith(f"https://github.com/{repo}/issues/new?")):
            url = None
        if url is not None:
            # Parentheses would end a markdown link early; they are equal to their escapes in a URL.
            url = url.replace("(", "%28").replace(")", "%29")
        complete = bool(meta.get("url_complete")) if isinstance(meta, dict) else False
        return Draft(repo if _REPO.match(repo) else "", md_text(_str(meta, "title") or "", 200), body, url, complete)
    return None


def load_reply(artifact: Path, node_id: str, result: ActionResult) -> Reply:
    reply = Reply(status=result.status, node_id=node_id, result=result,
                  requirements=[code_span(r, 120) for r in result.requirements[:20]],
                  detail=md_text(result.detail, 300), why=md_text(result.why, 120),
                  syntax_error=md_text(result.syntax_error or "", 200), hidden_why=md_text(result.hidden_why, 120),
                  attachment=code_span(result.attachment, 120) if result.attachment else "")
    repro = artifact / REPRO_SUBDIR
    if not repro.is_dir() or repro.is_symlink():
        return reply
    original = read_text(repro / "original.py")
    minimal = read_text(repro / "repro.py")
    if original is not None:
        reply.original = Size.of(original)
    if minimal is not None and minimal.strip():
        reply.reduced, reply.code, reply.minimal = Size.of(minimal), fence(minimal, "python"), True
        reply.hazards = _hazards(repro, minimal, minimal=True)
    elif original is not None:
        reply.code = fence(original, "python")
        reply.hazards = _hazards(repro, original, minimal=False)
    one_line, sig_id, first_runs = _signature(repro)
    if one_line:
        reply.signature, reply.signature_id = code_span(one_line), md_text(sig_id or "", 12)
    reply.runs = _runs(repro, first_runs)
    reply.related = _related(repro)
    reply.target, reply.reasons, reply.cross_links = _route(repro)
    route = read_json(repro / "route.json")
    if not reply.target and isinstance(_str(route, "verdict"), str):
        reply.verdict = md_text(_str(route, "verdict") or "", 240)
    reply.draft = _draft(repro, reply.target)
    if reply.draft is not None:
        _warn_draft(reply.draft, reply.hazards)
        reply.draft_fenced = fence(reply.draft.body, "markdown", MAX_DRAFT)
    return reply


_TOP_BLANKS = re.compile(r"\A(?:[ \t]*\n)+")


def _hazards(repro: Path, code: str, *, minimal: bool) -> dict[str, Any] | None:
    """The warning for the code the reply shows, found here from that code (line numbers as the
    fence shows it): the artifact's own draft is not trusted to carry one."""
    red = read_json(repro / "reduction.json")
    done = minimal and isinstance(red, dict) and red.get("status") == "done"
    return hazard_context(find_hazards(_TOP_BLANKS.sub("", code)), done)


def _warn_draft(draft: Draft, hazards: dict[str, Any] | None) -> None:
    """A draft of code with findings says so too: the warning goes on top of a draft that lacks
    it, and a pre-filled link whose form would open without it is not offered."""
    if hazards is None:
        return
    if not said_before_code(draft.body):
        macros = _environment().get_template("partials/hazards.md.j2").module
        draft.body = str(macros.warning(hazards)).strip() + "\n\n" + draft.body  # type: ignore[attr-defined]
    if draft.url and draft.url_complete and not said_before_code(urllib.parse.unquote(draft.url)):
        draft.url = None


# --- rendering -------------------------------------------------------------------------------

def _environment(directory: Path = TEMPLATES_DIR) -> jinja2.Environment:
    return environment([directory])


def render_reply(reply: Reply, directory: Path = TEMPLATES_DIR) -> str:
    if reply.status in SILENT:
        raise ValueError(f"no reply for status {reply.status}")
    text = _environment(directory).get_template(TEMPLATE).render(r=reply, marker=marker(reply.node_id))
    text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    if len(text) > MAX_REPLY:
        # Never cut inside the code: drop the draft first, it is in the artifact anyway.
        reply.draft_fenced = None
        text = _environment(directory).get_template(TEMPLATE).render(r=reply, marker=marker(reply.node_id))
        text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    return text
