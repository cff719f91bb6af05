"""A notebook or a test file attached to a discussion: which link, and its download (issue #43).

On GitHub a file dropped into a post becomes a markdown link to
``https://github.com/user-attachments/files/<id>/<name>`` (older posts:
``https://github.com/<owner>/<repo>/files/<id>/<name>``), which redirects to GitHub's storage.
When the post has no runnable code block, the reproduce job runs such a file instead, through
``reprobot reduce`` in the same sandbox as a code block:

- only a link a reader sees counts (the lines bot/action/visible.py says are shown; not inside a
  code span or a code block), and only a file reprobot can run as one: a notebook (``.ipynb``) or
  a pytest module (``test_*.py``, ``*_test.py``). Of several, the first in the post;
- it is fetched only from GitHub's attachment links, over https, following redirects only to
  GitHub's own storage hosts, never with a credential, at most ``MAX_BYTES`` and ``SECONDS``;
- a link to any other host, a file too large, a download that fails or bytes that are not UTF-8
  text are one line for the reply (``AttachmentError``), never a traceback.

The hosts are settings (``$REPROBOT_ATTACHMENT_WEB``, ``$REPROBOT_ATTACHMENT_STORAGE``) so that
tests point them at a local server, as ``$REPROBOT_GITHUB_API`` points the API client; the
defaults are GitHub's.
"""
from __future__ import annotations

import fnmatch
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Literal

WEB_ENV = "REPROBOT_ATTACHMENT_WEB"
STORAGE_ENV = "REPROBOT_ATTACHMENT_STORAGE"
DEFAULT_WEB = "https://github.com"
# Where github.com's attachment links redirect to (S3 buckets behind objects.githubusercontent.com).
DEFAULT_STORAGE = ("https://objects.githubusercontent.com",
                   "https://github-production-user-asset-6210df.s3.amazonaws.com",
                   "https://github-production-repository-file-5c1aeb.s3.amazonaws.com")
MAX_BYTES = 2 * 1024 * 1024
SECONDS = 60.0
MAX_REDIRECTS = 3
TEST_FILES = ("test_*.py", "*_test.py")     # pytest's python_files
Kind = Literal["notebook", "test"]

# A markdown link's destination (bounded: an unbounded text rescans the body from every "[") and a
# bare URL, which GitHub links too.
_LINK = re.compile(r"\[[^\[\]\n]{0,300}\]\(\s*<?(https?://[^\s()<>]{1,500})>?(?:\s+\"[^\"\n]{0,200}\")?\s*\)"
                   r"|(?<![(<\w])(https?://[^\s()<>\[\]`]{1,500})")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")


class AttachmentError(Exception):
    """One line for the reply: why the attached file was not run."""


@dataclass(frozen=True)
class Hosts:
    web: str = DEFAULT_WEB                      # the origin of the attachment links
    storage: tuple[str, ...] = DEFAULT_STORAGE  # the origins its redirects may lead to

    @classmethod
    def from_env(cls, environ: dict[str, str]) -> "Hosts":
        web = (environ.get(WEB_ENV) or DEFAULT_WEB).strip().rstrip("/")
        storage = tuple(s.strip().rstrip("/") for s in (environ.get(STORAGE_ENV) or "").split(",") if s.strip())
        return cls(web, storage or DEFAULT_STORAGE)

    def attachment_path(self, url: str) -> bool:
        """``url`` is one of GitHub's attachment links: the web origin, then
        ``/user-attachments/files/<id>/<name>`` or ``/<owner>/<repo>/files/<id>/<name>``."""
        if _origin(url) != _origin(self.web):
            return False
        path = urllib.parse.urlsplit(url).path
        return bool(re.fullmatch(r"/(?:user-attachments|[\w.-]{1,100}/[\w.-]{1,100})/files/\d{1,20}/[^/]{1,200}", path))


@dataclass(frozen=True)
class Link:
    url: str
    name: str            # the file name, as the URL ends (decoded), checked to be a plain name
    kind: Kind
    line: int            # 1-based line of the body


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}{port}"


def kind_of(name: str) -> Kind | None:
    if name.lower().endswith(".ipynb"):
        return "notebook"
    if any(fnmatch.fnmatchcase(name, p) for p in TEST_FILES):
        return "test"
    return None


def _file_name(url: str) -> str:
    return urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])


def runnable_links(body: str) -> list[Link]:
    """The links to a notebook or a test file that a reader sees, in the order of the post, on
    any host (the host is checked when it is fetched, so that a link elsewhere gets its line)."""
    from bot.action.visible import _parser, read

    hidden = read(body).hidden_lines
    out: list[Link] = []
    for tok in _parser().parse(body):
        if tok.type != "inline" or not tok.map or any(n in hidden for n in range(tok.map[0], tok.map[1])):
            continue
        # Text only: a URL in a code span (or raw HTML) is not a link a reader can follow.
        text = "".join(c.content if c.type == "text" else "\n" if c.type == "softbreak" else " "
                       for c in tok.children or [])
        for m in _LINK.finditer(text):
            url = (m.group(1) or m.group(2)).rstrip(".,;:!?'\"")
            name = _file_name(url)
            kind = kind_of(name)
            if kind is not None and all(link.url != url for link in out):
                out.append(Link(url, name, kind, tok.map[0] + 1))
    return out


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Each redirect is checked here before it is followed, never by urllib."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001
        return None


def fetch(link: Link, hosts: Hosts, *, max_bytes: int = MAX_BYTES, seconds: float = SECONDS) -> str:
    """The file's text; ``AttachmentError`` (one line) for anything else."""
    if not _NAME.match(link.name) or kind_of(link.name) is None:
        raise AttachmentError(f"the attached file's name {link.name[:80]!r} is not a plain file name")
    if not hosts.attachment_path(link.url):
        host = urllib.parse.urlsplit(link.url).hostname or "?"
        raise AttachmentError(f"{link.name} is linked from {host}, not a GitHub attachment "
                              f"({hosts.web}/user-attachments/files/...): reprobot downloads only those")
    deadline = time.monotonic() + seconds
    opener = urllib.request.build_opener(_NoRedirect)
    url = link.url
    for _ in range(MAX_REDIRECTS + 1):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AttachmentError(f"downloading {link.name} took over {seconds:.0f} s")
        # No cookies, no Authorization: the job holds no token, and none would be sent anywhere.
        request = urllib.request.Request(url, headers={"User-Agent": "reprobot-action", "Accept": "*/*"})
        try:
            with opener.open(request, timeout=min(left, 30.0)) as resp:
                return _read(resp, link, max_bytes, deadline, seconds)
        except urllib.error.HTTPError as e:
            if e.code in (301, 302, 303, 307, 308):
                target = urllib.parse.urljoin(url, e.headers.get("Location") or "")
                if _origin(target) not in {_origin(s) for s in hosts.storage}:
                    raise AttachmentError(f"downloading {link.name}: GitHub redirected to "
                                          f"{urllib.parse.urlsplit(target).hostname or '?'}, not its own storage")
                url = target
                continue
            raise AttachmentError(f"downloading {link.name} failed: HTTP {e.code}"
                                  + (" (an attachment of a private repository needs a token, which this job "
                                     "does not hold)" if e.code in (401, 403, 404) else "")) from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or type(e).__name__
            raise AttachmentError(f"downloading {link.name} failed ({str(reason)[:120]})") from None
    raise AttachmentError(f"downloading {link.name}: more than {MAX_REDIRECTS} redirects")


def _read(resp, link: Link, max_bytes: int, deadline: float, seconds: float) -> str:  # noqa: ANN001
    declared = resp.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise AttachmentError(f"{link.name} is {int(declared):,} bytes; the limit is {max_bytes:,}")
    chunks, total = [], 0
    while True:
        if time.monotonic() > deadline:
            raise AttachmentError(f"downloading {link.name} took over {seconds:.0f} s")
        chunk = resp.read(64 * 1024)
        if not chunk:
            break
        total += len(chunk)
        if total > max_bytes:
            raise AttachmentError(f"{link.name} is over the {max_bytes:,}-byte limit")
        chunks.append(chunk)
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise AttachmentError(f"{link.name} is not UTF-8 text") from None
    if "\x00" in text:
        raise AttachmentError(f"{link.name} is not text (it holds NUL bytes)")
    return text
