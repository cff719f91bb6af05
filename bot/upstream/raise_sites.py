"""Who raises this error message: a lookup in the stack's own ``raise`` statements.

A pasted traceback is often cut above the library frames, and a forum post may show the error
line alone; then the frames cannot say who raised, but the message can. bot/data/raise_sites.json.gz
holds the first line of every message template that transformers, peft, accelerate,
bitsandbytes and trl raise, over releases from 2022 on (scripts/build_raise_sites.py builds it from the
released wheels). A message matches a template when the template's literal text appears in it, in
order, with formatted values anywhere between, and the literal text says enough of it.
"""
from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

# How much of a template must be literal text, and how much of the message it must explain,
# before the template names its raiser (``f"Missing keys: {keys}"`` explains little of a long list).
MIN_LITERAL = 12
MIN_COVERAGE = 0.35
STRONG_LITERAL = 30         # this much literal text matches whatever the exception class says
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")


def release_key(version: str) -> tuple[int, ...]:
    """``0.41.3.post2`` -> (0, 41, 3, 2): releases in order (the catalogue's and its builder's)."""
    return tuple(int(x) for x in re.findall(r"\d+", version))


@dataclass(frozen=True)
class RaiseSite:
    package: str
    exc: str                # the exception class the raise names
    site: str               # ``peft/tuners/lora/model.py:_create_new_module`` (one of n_sites)
    n_sites: int
    first: str              # the first and last catalogued release that raise it
    last: str
    literal: int            # characters of literal text the message matched
    same_exc: bool          # the raise names the failure's exception class
    newest: str = ""        # the newest catalogued release of the package

    @property
    def gone(self) -> bool:
        """No catalogued release after ``last`` raises it: an upgrade may be the fix."""
        return bool(self.newest) and self.last != self.newest

    @property
    def where(self) -> str:
        more = f" and {self.n_sites - 1} other place(s)" if self.n_sites > 1 else ""
        releases = f"{self.first}–{self.last}" if self.first != self.last else self.first
        gone = f", not by later ones up to {self.newest}" if self.gone else ""
        return f"{self.site}{more}; raised by releases {releases}{gone}"


@dataclass(frozen=True)
class _Entry:
    package: str
    exc: str
    template: tuple[str | None, ...]
    sites: tuple[str, ...]
    n_sites: int
    first: str
    last: str
    literal: int            # characters of literal text in the template

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.template)


@lru_cache(maxsize=4096)
def _compiled(template: tuple[str | None, ...]) -> re.Pattern[str]:
    body = "".join(".*?" if p is None else re.escape(p) for p in template)
    return re.compile(r"\s*" + body, re.DOTALL)


class Catalogue:
    def __init__(self, entries: list[dict[str, Any]], versions: dict[str, list[str]] | None = None) -> None:
        self.newest = {pkg: max(vs, key=release_key) for pkg, vs in (versions or {}).items() if vs}
        self.entries = [_Entry(e["package"], e["exc"], tuple(e["template"]), tuple(e["sites"]), e["n_sites"],
                               e["first"], e["last"], sum(len(p) for p in e["template"] if p)) for e in entries]
        # Each template is filed under its rarest word; a message is checked only against the
        # templates filed under one of its own words.
        df: dict[str, int] = defaultdict(int)
        words_of = []
        for e in self.entries:
            words = {w.lower() for p in e.template if p for w in _WORD.findall(p)}
            words_of.append(words)
            for w in words:
                df[w] += 1
        self.by_word: dict[str, list[_Entry]] = defaultdict(list)
        self.wordless: list[_Entry] = []
        for e, words in zip(self.entries, words_of):
            if words:
                self.by_word[min(words, key=lambda w: (df[w], w))].append(e)
            else:
                self.wordless.append(e)

    def raised_by(self, exc_type: str | None, message: str | None) -> list[RaiseSite]:
        """The catalogued raises whose template this message fills, best first: the failure's
        own exception class first, then the most literal text."""
        text = re.sub(r"\s+", " ", (message or "").strip())
        if not text:
            return []
        exc = (exc_type or "").rsplit(".", 1)[-1]
        seen: set[int] = set()
        hits: list[RaiseSite] = []
        candidates = [e for w in {w.lower() for w in _WORD.findall(text)} for e in self.by_word.get(w, ())]
        for e in candidates + self.wordless:
            if id(e) in seen:
                continue
            seen.add(id(e))
            literal = e.literal
            if literal < MIN_LITERAL or not e.pattern.match(text):
                continue
            same = e.exc == exc
            if literal / max(len(text), 1) < MIN_COVERAGE and literal < STRONG_LITERAL:
                continue
            if not same and literal < STRONG_LITERAL:
                continue
            hits.append(RaiseSite(e.package, e.exc, e.sites[0], e.n_sites, e.first, e.last, literal, same,
                                  self.newest.get(e.package, "")))
        hits.sort(key=lambda h: (not h.same_exc, -h.literal, h.package, h.site))
        return hits


@lru_cache(maxsize=1)
def catalogue() -> Catalogue:
    try:
        raw = resources.files("bot").joinpath("data/raise_sites.json.gz").read_bytes()
        data = json.loads(gzip.decompress(raw))
    except (OSError, ValueError):
        # Routing works without it (the frames and the index still speak); a broken install
        # should not stop a report.
        return Catalogue([])
    return Catalogue(data.get("entries", []), data.get("versions"))


def raisers(exc_type: str | None, message: str | None) -> dict[str, RaiseSite]:
    """Package -> its best matching raise, for the packages whose code raises this message. Only
    the best literal match counts: a template that explains less of the message than another
    is a looser pattern, not a second raiser."""
    hits = catalogue().raised_by(exc_type, message)
    if not hits:
        return {}
    best = hits[0]
    out: dict[str, RaiseSite] = {}
    for h in hits:
        if h.same_exc == best.same_exc and h.literal >= best.literal * 0.8:
            out.setdefault(h.package, h)
    return out
