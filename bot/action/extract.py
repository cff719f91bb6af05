"""Find the script in a discussion body: its Python code blocks, and any dependency hints.

Rules (docs/ACTION.md repeats them for users):
- fenced blocks tagged ``python``/``py`` (```` ```python ````) are the candidates; when there are
  none, untagged blocks that parse as Python and import something are;
- only blocks a reader sees count (bot/action/visible.py): a block inside a collapsed
  ``<details>``, an HTML comment, ``<template>`` or anything else GitHub hides is never run,
  and what is written in it chooses nothing;
- of several, the one marked with a ``# reprobot: main`` line wins, else the largest. A
  ``reprobot`` word in the info string (```` ```python reprobot ````) does not choose: GitHub
  does not show the info string, and what decides what runs must be visible to the maintainer;
- notebook lines (``!pip install x``, ``%matplotlib``) become comments so the script parses;
- ``pip install`` lines and ```` ```requirements ```` blocks are recorded as dependency hints,
  each checked to be a plain PEP 508 requirement (no URLs, no pip options); they are only
  installed when the workflow says so;
- attachments (uploaded files) are not code blocks: a body with one and no code block says so,
  and the reproduce job runs an attached notebook or test file instead (bot/action/attachment.py).

The markdown is parsed with markdown-it-py (CommonMark), so ``~~~`` fences, longer backtick
fences and indentation follow the same rules GitHub's renderer does. Dependency hints are read
from the lines a reader sees only.
"""
from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass, field
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement

from bot.action.visible import read as read_shown

Status = Literal["ok", "no-script", "attachment-only", "syntax-error"]

_PY_TAGS = {"python", "py", "python3", "py3", "ipython", "ipython3"}
_REQ_TAGS = {"requirements", "requirements.txt", "pip-requirements", "pip"}
_MARK_LINE = re.compile(r"^\s*#\s*reprobot\s*:\s*main\b", re.MULTILINE | re.IGNORECASE)
# A pip install command at a line start (shell prompt, notebook "!") or inline in prose (`pip install x`).
_PIP_LINE = re.compile(r"(?<![^\s`(])(?:[$>#]\s*|!|%)?(?:python3?\s+-m\s+)?pip3?\s+install\s+(?P<args>[^`\n]+)",
                       re.MULTILINE)
# Uploaded files: github.com/user-attachments/files/..., github.com/<o>/<r>/files/..., and links to
# .py/.zip/.ipynb files that are not code blocks.
_ATTACHMENT = re.compile(
    r"https://github\.com/(?:user-attachments/files|[\w.-]+/[\w.-]+/files)/\d+/\S+"
    # bounded link text and URL: an unbounded [^\]]* rescans the rest of the body from every "["
    r"|\[[^\[\]\n]{0,300}\]\([^\s()]{1,500}\.(?:py|zip|ipynb|tar\.gz|txt)\)", re.IGNORECASE)
MAX_REQUIREMENTS = 40


@dataclass
class Block:
    index: int          # 1-based position among the fenced blocks a reader sees
    info: str
    content: str
    line: int           # 1-based line of the opening fence
    hidden: str | None = None   # why a reader does not see it (bot/action/visible.py)

    @property
    def tag(self) -> str:
        return self.info.split()[0].lower() if self.info.split() else ""

    @property
    def marked(self) -> bool:
        """A visible ``# reprobot: main`` line; the info string is not shown by GitHub."""
        return bool(_MARK_LINE.search(self.content))

    @property
    def info_marked(self) -> bool:
        return "reprobot" in self.info.lower().split()


@dataclass
class Extraction:
    status: Status
    script: str | None = None
    block: int | None = None          # which block was taken (1-based), for the reply
    candidates: int = 0               # how many Python blocks there were
    marked: bool = False
    why: str = ""                     # one line: why this block / why none
    syntax_error: str | None = None   # "line 3: invalid syntax" when the script does not parse
    requirements: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)   # hints that are not plain requirements
    attachments: int = 0
    hidden: int = 0                   # Python code blocks a reader does not see: never run
    hidden_why: str = ""              # where the first of them is ("inside a collapsed <details>")
    info_marker: int | None = None    # a visible block marked only in its info string (not honoured)

    def to_dict(self) -> dict[str, object]:
        return {"status": self.status, "block": self.block, "candidates": self.candidates,
                "marked": self.marked, "why": self.why, "syntax_error": self.syntax_error,
                "requirements": list(self.requirements), "rejected": list(self.rejected),
                "attachments": self.attachments, "hidden": self.hidden, "hidden_why": self.hidden_why,
                "info_marker": self.info_marker}


# GitHub stores at most this many characters in an issue or discussion body: a longer "body"
# did not come from GitHub, and parsing it would only cost time.
MAX_BODY = 65_536


def fenced_blocks(body: str) -> tuple[list[Block], list[Block], str]:
    """(the fences a reader sees, numbered among themselves; the hidden ones; the visible text)."""
    shown = read_shown(body)
    visible: list[Block] = []
    hidden: list[Block] = []
    for f in shown.fences:
        if f.hidden is None:
            visible.append(Block(len(visible) + 1, f.info, f.content, f.line))
        else:
            hidden.append(Block(0, f.info, f.content, f.line, f.hidden))
    return visible, hidden, shown.visible_text(body)


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def _looks_like_script(source: str) -> bool:
    """An untagged block counts only if it parses and imports something: a pasted traceback or
    a shell line does not, a one-word block of output parses but is no script."""
    if not source.strip() or not _parses(source):
        return False
    tree = ast.parse(source)
    return any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree))


def _decomment_notebook_lines(source: str) -> str:
    """``!pip install x`` / ``%time`` lines are IPython, not Python: keep them visible, as comments."""
    lines = []
    for line in source.splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped.startswith(("!", "%")):
            indent = line[: len(line) - len(stripped)]
            lines.append(f"{indent}# {stripped}")
        else:
            lines.append(line)
    return "".join(lines)


def _pip_args(args: str) -> tuple[list[str], list[str]]:
    """Requirements named on one ``pip install`` line; options and URLs go to ``rejected``."""
    try:
        words = shlex.split(args, comments=True)
    except ValueError:
        words = args.split()
    reqs, rejected = [], []
    skip_next = False
    for w in words:
        if skip_next:
            skip_next = False
            continue
        if w.startswith("-"):
            # Options that take a value (-r file, -i URL, -c file, -e path) swallow the next word.
            if w in ("-r", "-c", "-e", "-i", "--index-url", "--extra-index-url", "-f", "--find-links",
                     "--requirement", "--constraint", "--editable", "--target", "-t", "--prefix"):
                skip_next = True
            rejected.append(w)
            continue
        reqs.append(w)
    return reqs, rejected


def _checked(candidates: list[str]) -> tuple[list[str], list[str]]:
    ok, rejected = [], []
    for raw in candidates:
        raw = raw.strip()
        if not raw or raw.startswith("#"):
            continue
        try:
            req = Requirement(raw)
        except InvalidRequirement:
            rejected.append(raw[:100])
            continue
        if req.url or len(raw) > 200:
            rejected.append(raw[:100])
            continue
        text = str(req)
        if text not in ok:
            ok.append(text)
    return ok[:MAX_REQUIREMENTS], rejected[:MAX_REQUIREMENTS]


def dependency_hints(body: str, blocks: list[Block]) -> tuple[list[str], list[str]]:
    """Hints from ``body`` (the text a reader sees) and its ``blocks`` (the visible ones): an
    install line hidden in a comment must not run either."""
    raw: list[str] = []
    rejected: list[str] = []
    for b in blocks:
        if b.tag in _REQ_TAGS or "requirements.txt" in b.info.lower():
            for line in b.content.splitlines():
                line = line.split("#", 1)[0].strip()
                if line.startswith("-"):
                    rejected.append(line[:100])
                elif line:
                    raw.append(line)
    # pip install lines anywhere: prose, shell blocks, notebook cells.
    for m in _PIP_LINE.finditer(body):
        reqs, bad = _pip_args(m.group("args").strip().strip("`"))
        raw.extend(reqs)
        rejected.extend(bad)
    ok, bad = _checked(raw)
    return ok, list(dict.fromkeys(rejected + bad))[:MAX_REQUIREMENTS]


def _is_python(block: Block) -> bool:
    return block.tag in _PY_TAGS or block.tag.startswith("python")


def _candidates(blocks: list[Block]) -> list[Block]:
    tagged = [b for b in blocks if _is_python(b)]
    return tagged or [b for b in blocks if not b.tag and _looks_like_script(_decomment_notebook_lines(b.content))]


def extract(body: str) -> Extraction:
    if len(body) > MAX_BODY:
        from reducer.errors import ExitCode, ReprobotError
        raise ReprobotError(f"the discussion body has {len(body):,} characters; GitHub allows {MAX_BODY:,}: "
                            "not a body GitHub sent", ExitCode.BAD_INPUT)
    blocks, hidden_blocks, visible_text = fenced_blocks(body)
    requirements, rejected = dependency_hints(visible_text, blocks)
    attachments = len(_ATTACHMENT.findall(body))
    candidates = _candidates(blocks)
    hidden = [b for b in hidden_blocks if _is_python(b) or _looks_like_script(_decomment_notebook_lines(b.content))]
    info_marker = next((b.index for b in candidates if b.info_marked and not b.marked), None)
    common = dict(requirements=requirements, rejected=rejected, attachments=attachments, hidden=len(hidden),
                  hidden_why=(hidden[0].hidden or "") if hidden else "", info_marker=info_marker)
    if not candidates:
        if hidden:
            where = hidden[0].hidden
            return Extraction("no-script", why=f"the Python code block{'s are' if len(hidden) > 1 else ' is'} hidden "
                                               f"({where}); reprobot runs only code a reader sees", **common)
        if attachments:
            return Extraction("attachment-only", why="the script is an attached file; of those, reprobot runs only "
                                                     "a notebook or a test file", **common)
        return Extraction("no-script", why="no Python code block in the discussion", **common)
    marked = [b for b in candidates if b.marked]
    if marked:
        chosen, why = marked[0], "the block with a `# reprobot: main` line"
    elif len(candidates) == 1:
        chosen, why = candidates[0], "the only Python code block"
    else:
        # Ties go to the earlier block: the question usually comes before the follow-ups.
        chosen = max(candidates, key=lambda b: (len(b.content.strip()), -b.index))
        why = f"the largest of {len(candidates)} Python code blocks"
    script = _decomment_notebook_lines(chosen.content)
    if not script.strip():
        return Extraction("no-script", block=chosen.index, candidates=len(candidates),
                          why="the Python code block is empty", **common)
    result = Extraction("ok", script=script, block=chosen.index, candidates=len(candidates),
                        marked=bool(marked), why=why, **common)
    try:
        ast.parse(script)
    except SyntaxError as e:
        result.status = "syntax-error"
        result.syntax_error = f"line {e.lineno}: {e.msg}" if e.lineno else str(e.msg)
    except ValueError as e:  # null bytes
        result.status = "syntax-error"
        result.syntax_error = str(e)[:200]
    return result
