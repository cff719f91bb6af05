"""The one way untrusted text enters markdown reprobot writes (drafts, the Action's reply).

Untrusted is anything from the user's script, traceback or environment, or from GitHub (titles
of related issues). It goes through one of:

- ``inline(text)``: one line of prose. Code spans in it are kept (re-fenced); everything else
  is literal: markdown punctuation is backslash-escaped, ``& < >`` become entities, URLs become
  code spans, and ``@name``, ``#123``, ``GH-123`` get a zero-width space (``&#8203;``) after
  the sigil. GitHub links mentions, issue references and URLs only in text outside code, and a
  mention or reference must follow its sigil directly: Dependabot and Renovate quote release
  notes the same way (``@&#8203;user``) so as not to ping anyone or backlink any issue.
- ``code_span(text)``: one line as inline code, with a backtick fence longer than any run in it.
- ``fence(text, lang)``: a fenced code block whose fence no line inside can close.
- ``lines(text)``: several lines (a System Info list): each line as ``inline``, its list marker kept.
- ``comment(text)``: text inside an HTML comment, which cannot end the comment.
"""
from __future__ import annotations

import re

ZWSP = "&#8203;"
URL = re.compile(r"(?:\b[a-z][\w.+-]*\+)?(?:\b(?:https?|ftp)://|\bwww\.)\S+", re.IGNORECASE)
# Backslash escapes cover what could start a construct mid-line: emphasis and strikethrough
# (could hide or restyle text), links and images, code, pipes (table cells), math and escapes.
_PUNCT = re.compile(r"([\\`*~\[\]|$])")
_LONE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # intraword `_` never emphasises
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_REFERENCE = re.compile(r"(#|\bGH-)(?=\d)", re.IGNORECASE)
# What turns a line into a block when it starts it: heading, quote, list item, setext underline.
_LINE_START = re.compile(r"^([#>+=-])")
_ORDERED_START = re.compile(r"^(\d{1,9})([.)])")
_LIST_ITEM = re.compile(r"^([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+)")
_BACKTICKS = re.compile(r"`+")


def _longest_run(text: str, char: str = "`") -> int:
    return max((len(m) for m in re.findall(re.escape(char) + "+", text)), default=0)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _cut(text: str, limit: int | None) -> str:
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "\u2026"


def code_span(text: str, limit: int | None = None) -> str:
    """Inline code. Newlines go: a line inside a paragraph that starts with ``#`` or ``-`` would
    become a block before the span is ever parsed. Padded with a space on both sides (CommonMark
    strips exactly one from each) when the content holds a backtick or starts or ends with a
    space, so the fence stays apart from the content."""
    one = _cut(_one_line(text), limit)
    if not one:
        return ""
    ticks = "`" * (_longest_run(one) + 1)
    pad = " " if "`" in one or one[0] == " " or one[-1] == " " else ""
    return f"{ticks}{pad}{one}{pad}{ticks}"


def fence(text: str, lang: str = "") -> str:
    """A fenced code block. Only a line of backticks at least as long as the opening fence closes
    it, so a fence longer than every backtick run inside cannot be closed early (a tilde line
    cannot close a backtick fence at all)."""
    body = re.sub(r"\A(?:[ \t]*\n)+", "", str(text).rstrip())  # blank lines a reduction left at the top
    ticks = "`" * max(3, _longest_run(body) + 1)
    info = re.sub(r"[^\w+.-]", "", lang)  # a backtick in the info string would void the fence
    return f"{ticks}{info}\n{body}\n{ticks}"


def _prose(text: str) -> str:
    """Plain text with nothing left to parse: no tags, entities, links, mentions or references."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _PUNCT.sub(r"\\\1", text)
    text = _LONE_UNDERSCORE.sub(r"\\_", text)
    # References first: the mention's ``&#8203;`` holds a ``#`` and digits of its own.
    text = _REFERENCE.sub(lambda m: m.group(1) + ZWSP, text)
    return _MENTION.sub("@" + ZWSP, text)


def _text(text: str) -> str:
    """Prose in which URLs are code: GitHub autolinks a bare URL and, for an issue's URL, adds a
    backlink to that issue; it does neither inside code."""
    out, at = [], 0
    for m in URL.finditer(text):
        out += [_prose(text[at:m.start()]), code_span(m.group())]
        at = m.end()
    return "".join(out + [_prose(text[at:])])


def _segments(text: str) -> list[tuple[bool, str]]:
    """(is_code, text) pieces, code spans found as CommonMark finds them: a backtick run opens a
    span closed by the next run of the same length; a run with no partner is literal."""
    out: list[tuple[bool, str]] = []
    at = 0
    runs = list(_BACKTICKS.finditer(text))
    i = 0
    while i < len(runs):
        opener = runs[i]
        close = next((j for j in range(i + 1, len(runs)) if len(runs[j].group()) == len(opener.group())), None)
        if close is None:
            i += 1
            continue
        out += [(False, text[at:opener.start()]), (True, text[opener.end():runs[close].start()])]
        at = runs[close].end()
        i = close + 1
    return out + [(False, text[at:])]


def _block_start(text: str) -> str:
    """Escape what would make a block of the line the text may begin (``# x``, ``- x``, ``1. x``)."""
    return _ORDERED_START.sub(r"\1\\\2", _LINE_START.sub(r"\\\1", text))


def _inline_line(text: str) -> str:
    parts = [(code, t) for code, t in _segments(text) if t]
    out = [code_span(t) if code else _text(t) for code, t in parts]
    if parts and not parts[0][0]:
        out[0] = _block_start(out[0])
    return "".join(out)


def inline(text: str, limit: int | None = None) -> str:
    """One line of untrusted prose, rendered as the text it is (its code spans kept as code)."""
    return _inline_line(_cut(_one_line(text), limit))


def lines(text: str) -> str:
    """Several lines of untrusted text, each as ``inline``; a leading list marker is kept, so a
    ``- key: value`` list stays a list. A line that is no item after one that is gets a blank
    line first: without it, it would run on as a lazy continuation of the item."""
    out: list[str] = []
    in_list = False
    for line in str(text).splitlines():
        m = _LIST_ITEM.match(line)
        head = m.group(1) if m else ""
        if in_list and not m and line.strip():
            out.append("")
        in_list = bool(m) or (in_list and not line.strip())
        out.append(head + _inline_line(" ".join(line[len(head):].split())))
    return "\n".join(out)


def comment(text: str) -> str:
    """Text for inside an HTML comment: ``-->`` (or ``--!>``) would end the comment and show the rest."""
    return re.sub(r"--(!?)>", r"--\1&gt;", str(text))


FILTERS = {"inline": inline, "code_span": code_span, "fence": fence, "lines": lines, "comment": comment}



def top_level_html(text: str) -> list[str]:
    """The HTML blocks a body holds at its own top level, each stripped: what is in a code block,
    inline code, a quote or a list item is not among them."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text or "")
    return [t.content.strip() for t in tokens if t.type == "html_block" and t.level == 0]


__all__ = ["FILTERS", "ZWSP", "code_span", "comment", "fence", "inline", "lines", "top_level_html"]
