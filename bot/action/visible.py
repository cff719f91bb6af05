"""Which fenced code blocks of a discussion body a reader sees on GitHub, and which lines.

The Action runs only code a maintainer can review by reading the post (issue #39). GitHub turns
the body into HTML (cmark-gfm), sanitizes it and shows it; raw HTML in the body can hide what
follows it: a collapsed ``<details>``, an ``<!-- comment -->``, ``<template>``, an element with
``hidden``. A fence inside one is still a fence to a markdown parser, so this module follows the
HTML the way a browser builds its tree:

- markdown-it-py parses the block structure (fences, HTML blocks, paragraphs, lists, tables) and
  the inline HTML, code spans and escapes, like GitHub's CommonMark/GFM renderer;
- the markup the renderer generates (``<p>``, ``<li>``, ``<td>``, the fence's ``<pre>``) and the
  body's raw HTML are fed, in document order, through a small model of the HTML5 tree builder:
  comments and raw-text elements (which only raw HTML can close: rendered text is escaped),
  the stack of open elements with the scope rules that decide whether an end tag closes anything,
  and formatting elements that re-open themselves after a paragraph ends;
- a fence is hidden when it sits in a comment or raw-text element, inside a collapsed
  ``<details>`` (its first ``<summary>`` excepted), inside ``<template>``, ``<select>``, ``<svg>``
  and the other elements that do not show their content, inside any element with a ``hidden``
  or ``style`` attribute (GitHub drops both today; reprobot does not count on it), or after raw
  HTML that leaves a tag, attribute or bogus comment open (the browser would swallow the markup
  that follows into it).

Where the model is unsure it says hidden: a post whose script is wrongly judged hidden gets a
reply asking for a plain code block; a hidden script judged visible would run unreviewed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token

_VOID = frozenset({"area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "img", "input",
                   "keygen", "link", "meta", "param", "source", "track", "wbr"})
# Their content is text up to their own end tag; only raw HTML can end them.
_RAWTEXT = frozenset({"script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "noscript"})
# Elements whose content a reader does not see (or sees only as a widget, not as code).
_HIDING = _RAWTEXT | frozenset({"template", "select", "option", "optgroup", "datalist", "svg", "math", "audio",
                                "video", "canvas", "object", "applet", "head", "rp", "progress", "meter", "frameset"})
_FORMATTING = frozenset({"a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong",
                         "tt", "u"})
_MARKERS = frozenset({"applet", "object", "marquee", "template", "td", "th", "caption"})
_SCOPE = frozenset({"applet", "caption", "html", "table", "td", "th", "marquee", "object", "template", "mi", "mo",
                    "mn", "ms", "mtext", "annotation-xml", "foreignobject", "desc"})
_BUTTON_SCOPE = _SCOPE | {"button"}
_LIST_SCOPE = _SCOPE | {"ol", "ul"}
_TABLE_SCOPE = frozenset({"html", "table", "template"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_CLOSES_P = _HEADINGS | frozenset({
    "address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div", "dl", "fieldset",
    "figcaption", "figure", "footer", "header", "hgroup", "main", "menu", "nav", "ol", "p", "search", "section",
    "summary", "ul", "pre", "listing", "form", "hr", "xmp", "table", "li", "dd", "dt", "plaintext"})
_BLOCK_END = frozenset({
    "address", "article", "aside", "blockquote", "button", "center", "details", "dialog", "dir", "div", "dl",
    "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "listing", "main", "menu", "nav", "ol", "pre",
    "search", "section", "summary", "ul", "form"})
_TABLE_END = frozenset({"table", "tbody", "tfoot", "thead", "tr", "td", "th", "caption"})
# HTML5's "special" elements: an unknown end tag does not close past one of them.
_SPECIAL = _CLOSES_P | _SCOPE | _VOID | _RAWTEXT | frozenset({
    "body", "button", "colgroup", "frameset", "head", "html", "iframe", "select", "tbody", "tfoot", "thead", "tr",
    "template"})
_SPACE = " \t\n\f\r"
# Bounds that keep every step of the model short on crafted input (a body is at most 65,536
# characters). Past them the rest of the body counts as hidden: browsers and GitHub's sanitizer
# have nesting limits of their own, and no post needs this much HTML around its script.
MAX_DEPTH = 64
MAX_ACTIVE = 16


@dataclass
class _El:
    tag: str
    hides: str | None = None        # why its content is not shown, if it is not
    collapsed: bool = False         # a <details> without ``open``
    has_summary: bool = False       # (details) its first <summary> child was opened
    first_summary: bool = False     # (summary) the one a collapsed <details> still shows
    markers: int = 0                # markers on the stack when it was opened (formatting elements)


@dataclass(frozen=True)
class Fence:
    number: int          # 1-based among the body's fences, hidden ones included
    info: str
    content: str
    line: int            # 1-based line of the opening fence
    hidden: str | None   # why a reader does not see it ("inside a collapsed <details>"), None when shown


@dataclass
class Shown:
    fences: list[Fence] = field(default_factory=list)
    hidden_lines: set[int] = field(default_factory=set)   # 0-based body lines a reader may not see

    def visible_text(self, body: str) -> str:
        """The body without the lines a reader may not see (what dependency hints are read from)."""
        return "".join(line for n, line in enumerate(body.splitlines(keepends=True)) if n not in self.hidden_lines)


class _Tree:
    """The HTML5 tree builder, as far as it decides what is shown: open elements, scopes, the
    formatting elements that re-open, comments and raw text that swallow whatever follows."""

    def __init__(self) -> None:
        self.stack: list[_El] = []
        self.active: list[_El] = []     # hiding formatting elements still in effect
        self.mode = "data"              # "data", "comment", or the raw-text element's name
        self.poisoned: str | None = None
        self.saw_hidden = False         # set when anything since the last reset was not shown

    # --- what is shown --------------------------------------------------------------------------
    def hidden(self) -> str | None:
        if self.poisoned:
            return self.poisoned
        if self.mode == "comment":
            return "inside an HTML comment"
        if self.mode != "data":
            return f"inside <{self.mode}>"
        for el in self.active:
            if el.hides and el not in self.stack:
                return el.hides
        i = 0
        while i < len(self.stack):
            el = self.stack[i]
            if el.hides:
                return el.hides
            if el.collapsed:
                nxt = self.stack[i + 1] if i + 1 < len(self.stack) else None
                if nxt is None or not nxt.first_summary:
                    return "inside a collapsed <details>"
            i += 1
        return None

    def note(self) -> None:
        if self.hidden() is not None:
            self.saw_hidden = True

    # --- elements -------------------------------------------------------------------------------
    def _markers(self) -> int:
        return sum(1 for el in self.stack if el.tag in _MARKERS)

    def _in_scope(self, names: frozenset[str] | set[str], scope: frozenset[str]) -> bool:
        for el in reversed(self.stack):
            if el.tag in names:
                return True
            if el.tag in scope:
                return False
        return False

    def _pop_until(self, names: frozenset[str] | set[str]) -> None:
        while self.stack:
            el = self.stack.pop()
            if el.tag in names:
                break
        # Formatting elements opened inside a closed cell (a marker) stop re-opening.
        markers = self._markers()
        self.active = [el for el in self.active if el.markers <= markers]

    def _in_select(self) -> bool:
        return any(el.tag == "select" for el in self.stack)

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if self.poisoned or self.mode != "data":
            return
        if self._in_select():
            # Inside <select> the tree builder ignores every other tag (markup the renderer writes
            # included) and keeps the text in the list; these end it.
            if name not in ("select", "input", "keygen", "textarea"):
                return
            self._pop_until({"select"})
            if name == "select":
                return
        if name in ("html", "body", "head"):
            # Their attributes are merged onto the page's own element: a hidden one hides it all.
            if "hidden" in attrs or "style" in attrs:
                self.poisoned = f"after <{name}> with a hidden or style attribute"
            return
        if name in _CLOSES_P and self._in_scope({"p"}, _BUTTON_SCOPE):
            self._pop_until({"p"})
        if name == "plaintext":
            self.poisoned = "after <plaintext> (the rest of the page is text)"
            return
        if name in _VOID:
            return
        if len(self.stack) >= MAX_DEPTH or len(self.active) >= MAX_ACTIVE:
            self.poisoned = "after HTML nested too deeply to follow"
            return
        el = _El(name, hides=_hides(name, attrs), collapsed=name == "details" and "open" not in attrs,
                 markers=self._markers())
        top = self.stack[-1] if self.stack else None
        if name == "summary" and top is not None and top.tag == "details" and not top.has_summary:
            top.has_summary = el.first_summary = True
        self.stack.append(el)
        if name in _FORMATTING and el.hides:
            self.active.append(el)
        if name in _RAWTEXT:
            self.mode = name

    def end(self, name: str) -> None:
        if self.poisoned or self.mode != "data" or name in ("html", "body", "head", "br"):
            return
        if self._in_select():
            if name == "select":
                self._pop_until({"select"})
            return
        if name == "p":
            if self._in_scope({"p"}, _BUTTON_SCOPE):
                self._pop_until({"p"})
        elif name == "li":
            if self._in_scope({"li"}, _LIST_SCOPE):
                self._pop_until({"li"})
        elif name in ("dd", "dt") or name in _BLOCK_END:
            if self._in_scope({name}, _SCOPE):
                self._pop_until({name})
        elif name in _HEADINGS:
            if self._in_scope(_HEADINGS, _SCOPE):
                self._pop_until(_HEADINGS)
        elif name == "template":
            if any(el.tag == "template" for el in self.stack):
                self._pop_until({"template"})
        elif name in _TABLE_END:
            if self._in_scope({name}, _TABLE_SCOPE):
                self._pop_until({name})
        elif name in _FORMATTING:
            self._adoption(name)
        else:
            self._any_other(name)

    def _adoption(self, name: str) -> None:
        """The adoption agency's outcome for visibility: the formatting element is closed when it
        is in scope, and stops re-opening; an end tag across a cell boundary does nothing."""
        markers = self._markers()
        entry = next((el for el in reversed(self.active) if el.tag == name and el.markers == markers), None)
        if entry is None:
            self._any_other(name)
            return
        if entry not in self.stack:
            self.active.remove(entry)
            return
        for el in reversed(self.stack):
            if el is entry:
                break
            if el.tag in _SCOPE:
                return      # not in scope: ignored, and it stays open
        while self.stack and self.stack.pop() is not entry:
            pass
        self.active.remove(entry)

    def _any_other(self, name: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i].tag == name:
                del self.stack[i:]
                return
            if self.stack[i].tag in _SPECIAL:
                return

    # --- raw HTML from the body ---------------------------------------------------------------
    def feed(self, raw: str) -> None:
        pos, n = 0, len(raw)
        self.note()
        while pos < n and not self.poisoned:
            if self.mode == "comment":
                end = _comment_end(raw, pos)
                self.saw_hidden = True
                if end < 0:
                    return
                self.mode, pos = "data", end
                self.note()
                continue
            if self.mode != "data":
                end = _rawtext_end(raw, pos, self.mode)
                self.saw_hidden = True
                if end < 0:
                    return
                tag = _tag(raw, end)
                if tag is None:
                    self.poisoned = f"after an unclosed </{self.mode}> tag"
                    return
                name = self.mode
                self.mode = "data"
                self.end(name)
                pos = tag[3]
                self.note()
                continue
            lt = raw.find("<", pos)
            if lt < 0:
                return
            pos = self._markup(raw, lt)
            self.note()

    def _markup(self, raw: str, lt: int) -> int:
        """One construct starting at ``raw[lt] == '<'``; returns where the next one may start."""
        if raw.startswith("<!--", lt):
            self.saw_hidden = True
            if raw.startswith("<!-->", lt):
                return lt + 5
            if raw.startswith("<!--->", lt):
                return lt + 6
            end = _comment_end(raw, lt + 4)
            if end < 0:
                self.mode = "comment"      # until a later raw "-->": rendered text cannot end it
                return len(raw)
            return end
        nxt = raw[lt + 1:lt + 2]
        if nxt in ("!", "?") or (nxt == "/" and not raw[lt + 2:lt + 3].isalpha()):
            if raw.startswith("</>", lt):
                return lt + 3
            # A bogus comment (doctype, CDATA, processing instruction) runs to the next ">".
            self.saw_hidden = True
            gt = raw.find(">", lt)
            if gt < 0:
                self.poisoned = "after an unclosed <! or <? construct"
                return len(raw)
            return gt + 1
        if not (nxt.isascii() and nxt.isalpha()) and nxt != "/":
            return lt + 1
        tag = _tag(raw, lt)
        if tag is None:
            # The browser would read the markup the renderer writes next as this tag's attributes.
            self.poisoned = "after an unclosed HTML tag"
            return len(raw)
        closing, name, attrs, after = tag
        if closing:
            self.end(name)
        else:
            self.start(name, attrs)
        return after


def _hides(name: str, attrs: dict[str, str]) -> str | None:
    if "hidden" in attrs:
        return f"inside <{name} hidden>"
    if "style" in attrs:
        return f"inside <{name} style=…> (a style can hide it)"
    if name in _HIDING:
        return f"inside <{name}>"
    if name == "dialog" and "open" not in attrs:
        return "inside a closed <dialog>"
    return None


def _comment_end(raw: str, pos: int) -> int:
    """Where a comment that is open at ``pos`` ends (just past ``-->`` or ``--!>``), or -1."""
    ends = [i + len(s) for s in ("-->", "--!>") if (i := raw.find(s, pos)) >= 0]
    return min(ends) if ends else -1


def _rawtext_end(raw: str, pos: int, name: str) -> int:
    """Where ``</name`` followed by a space, ``/`` or ``>`` starts, or -1."""
    m = re.compile(rf"</{re.escape(name)}[ \t\n\f\r/>]", re.IGNORECASE).search(raw, pos)
    return m.start() if m else -1


def _tag(raw: str, lt: int) -> tuple[bool, str, dict[str, str], int] | None:
    """A start or end tag at ``lt``, read as HTML5's tokenizer reads it: (closing, name,
    attributes, index after ``>``); None when the chunk ends before the tag does."""
    n = len(raw)
    closing = raw.startswith("</", lt)
    i = lt + (2 if closing else 1)
    start = i
    while i < n and raw[i] not in _SPACE + "/>":
        i += 1
    name = raw[start:i].lower()
    attrs: dict[str, str] = {}
    while True:
        while i < n and (raw[i] in _SPACE or (raw[i] == "/" and raw[i + 1:i + 2] != ">")):
            i += 1
        if i >= n:
            return None
        if raw.startswith("/>", i):
            return closing, name, attrs, i + 2
        if raw[i] == ">":
            return closing, name, attrs, i + 1
        a = i
        i += 1      # an attribute name may start with "="
        while i < n and raw[i] not in _SPACE + "/>=":
            i += 1
        attr = raw[a:i].lower()
        value = ""
        j = i
        while j < n and raw[j] in _SPACE:
            j += 1
        if j < n and raw[j] == "=":
            j += 1
            while j < n and raw[j] in _SPACE:
                j += 1
            if j >= n:
                return None
            if raw[j] in "\"'":
                close = raw.find(raw[j], j + 1)
                if close < 0:
                    return None
                value, i = raw[j + 1:close], close + 1
            else:
                v = j
                while j < n and raw[j] not in _SPACE + ">":
                    j += 1
                value, i = raw[v:j], j
        attrs.setdefault(attr, value)


def _parser() -> MarkdownIt:
    # Block structure with GFM tables (a table cell is a scope boundary for HTML end tags), raw
    # HTML, and the inline rules that decide whether "<x>" is a tag: code spans, escapes,
    # autolinks. Links, images, emphasis, line breaks and reference definitions are left out:
    # they do not change what is HTML (a destination "<x>" read as a tag only hides more), and
    # they are where crafted input turns slow (a token per line break, "[" rescans).
    return (MarkdownIt("commonmark", {"html": True}).enable("table")
            .disable(["reference", "link", "image", "emphasis", "newline"]))


_GENERATED = {"paragraph": "p", "blockquote": "blockquote", "bullet_list": "ul", "ordered_list": "ol",
              "list_item": "li", "table": "table", "thead": "thead", "tbody": "tbody", "tr": "tr", "th": "th",
              "td": "td"}


def read(body: str) -> Shown:
    """Every fence of ``body`` with whether a reader sees it, and the lines a reader may not see."""
    tree = _Tree()
    shown = Shown()

    def hide_lines(tok: Token) -> None:
        if tok.map:
            shown.hidden_lines.update(range(tok.map[0], tok.map[1]))

    for tok in _parser().parse(body):
        name, _, edge = tok.type.rpartition("_")
        if edge in ("open", "close") and (name in _GENERATED or name == "heading"):
            if tok.hidden:          # a tight list's paragraphs are not rendered as <p>
                continue
            tag = tok.tag if name == "heading" else _GENERATED[name]
            if edge == "open":
                tree.start(tag, {})
            else:
                tree.end(tag)
        elif tok.type == "hr":
            tree.start("hr", {})
        elif tok.type in ("fence", "code_block"):
            tree.start("pre", {})
            why = tree.hidden()
            tree.end("pre")
            if why is not None:
                hide_lines(tok)
            if tok.type == "fence":
                shown.fences.append(Fence(len(shown.fences) + 1, tok.info.strip(), tok.content,
                                          (tok.map[0] + 1) if tok.map else 0, why))
        elif tok.type == "html_block":
            tree.saw_hidden = False
            tree.feed(tok.content)
            if tree.saw_hidden:
                hide_lines(tok)
        elif tok.type == "inline":
            tree.saw_hidden = False
            tree.note()
            for child in tok.children or []:
                if child.type == "html_inline":
                    tree.feed(child.content)
                elif child.type == "link_open":
                    tree.start("a", {})
                elif child.type == "link_close":
                    tree.end("a")
            if tree.saw_hidden:
                hide_lines(tok)
    return shown
