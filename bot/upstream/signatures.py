"""Did any release of the stack accept this keyword: a typo, or a version mismatch?

``TypeError: X.__init__() got an unexpected keyword argument 'k'`` is a usage error when no
catalogued release of the package let ``X`` take ``k``, and an environment (version) problem when
another release does. bot/data/signatures.json.gz (scripts/build_signatures.py, from the released
wheels) holds, per package and callable, the releases each parameter name is accepted in.

    parse_signature_error(message) -> SignatureError | None
    keyword_in_releases(callable_name, keyword) -> KeywordAnswer
"""
from __future__ import annotations

import difflib
import gzip
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from bot.upstream.raise_sites import release_key

Verdict = Literal["unknown_callable", "in_some_release", "in_no_release"]
Shape = Literal["unexpected", "missing", "not_understood"]

# Bases of another package a callable inherits its parameters from are followed this deep
# (a trl config -> transformers' TrainingArguments).
_BASE_DEPTH = 3


@dataclass(frozen=True)
class SignatureError:
    """What a TypeError about arguments names."""
    callable: str | None        # as the message names it (``Accelerator.__init__``), None if it names none
    keywords: tuple[str, ...]
    shape: Shape                # an unexpected keyword, a missing argument, Keras' "not understood"


@dataclass(frozen=True)
class KeywordAnswer:
    verdict: Verdict
    callable: str               # the catalogue's name (``Accelerator``, ``Trainer.train``), or the asked name
    keyword: str
    package: str = ""
    first: str = ""             # in_some_release: the first and last catalogued release that accept it
    last: str = ""
    newest: str = ""            # the package's newest catalogued release
    in_newest: bool = False
    via: str = ""               # in_some_release through a base of another package: ``transformers:TrainingArguments``
    takes_kwargs: bool = False  # in_no_release: some release of the callable takes **kwargs
    unresolved_bases: tuple[str, ...] = ()   # in_no_release: bases no catalogued package defines, whose
                                             # parameters the answer cannot vouch for
    callable_first: str = ""    # the releases the callable exists in (first..last)
    callable_last: str = ""

    @property
    def version_mismatch(self) -> bool:
        return self.verdict == "in_some_release"


_UNEXPECTED = re.compile(r"(?:(?P<name>[\w.<>]+)\(\) )?got an unexpected keyword argument '(?P<kw>[^']+)'")
_MISSING = re.compile(r"(?:(?P<name>[\w.<>]+)\(\) )?missing \d+ required (?:positional|keyword-only) arguments?: "
                      r"(?P<kws>'[^']+'(?:(?:, | and |, and )'[^']+')*)")
_NOT_UNDERSTOOD = re.compile(r"Keyword argument not understood:'?,?\s*'?(?P<kw>\w+)")


def parse_signature_error(message: str | None) -> SignatureError | None:
    """The callable and keyword(s) a TypeError about arguments names, or None for another message."""
    text = message or ""
    m = _UNEXPECTED.search(text)
    if m:
        return SignatureError(m.group("name"), (m.group("kw"),), "unexpected")
    m = _MISSING.search(text)
    if m:
        return SignatureError(m.group("name"), tuple(re.findall(r"'([^']+)'", m.group("kws"))), "missing")
    m = _NOT_UNDERSTOOD.search(text)
    if m:
        return SignatureError(None, (m.group("kw"),), "not_understood")
    return None


def _span(mask: int, versions: list[str]) -> tuple[str, str]:
    bits = [i for i in range(len(versions)) if mask >> i & 1]
    return (versions[bits[0]], versions[bits[-1]]) if bits else ("", "")


@dataclass(frozen=True)
class _Row:
    exists: int
    var_kw: int
    params: dict[str, int]
    unresolved: tuple[str, ...]


class Catalogue:
    def __init__(self, data: dict[str, Any]) -> None:
        self.versions: dict[str, list[str]] = data.get("versions", {})
        self.rows: dict[str, dict[str, _Row]] = {
            pkg: {name: _Row(r[0], r[1], r[2], tuple(r[3]) if len(r) > 3 else ()) for name, r in rows.items()}
            for pkg, rows in data.get("callables", {}).items()}

    @staticmethod
    def key(name: str) -> str | None:
        """The catalogue's name for a callable as a message names it: ``X.__init__`` and ``X`` are
        the class ``X``; a bare ``__init__`` (Python < 3.10) names nobody."""
        name = name.strip().removesuffix("()")
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        # ``transformers.Trainer.train`` or a nested qualname: the last class and method suffice.
        parts = [p for p in name.split(".") if p and p != "<locals>"]
        if not parts or parts[-1].startswith("_"):
            return None
        return ".".join(parts[-2:]) if len(parts) > 1 and parts[-2][:1].isupper() else parts[-1]

    def _found(self, name: str) -> list[tuple[str, _Row]]:
        return [(pkg, rows[name]) for pkg, rows in self.rows.items() if name in rows]

    def _seen_in(self, name: str, keyword: str, depth: int) -> tuple[str, str, int] | None:
        """(package, callable, releases accepting ``keyword``) on ``name`` or, through bases the
        package could not resolve, on a catalogued class of another package."""
        for pkg, row in self._found(name):
            mask = row.params.get(keyword, 0)
            if mask:
                return pkg, name, mask
        if depth < _BASE_DEPTH:
            for _pkg, row in self._found(name):
                for base in row.unresolved:
                    hit = self._seen_in(base, keyword, depth + 1)
                    if hit:
                        return hit
        return None

    def _open_bases(self, name: str, depth: int) -> set[str]:
        """Bases of ``name`` that no catalogued package defines, through those one does."""
        out: set[str] = set()
        for _pkg, row in self._found(name):
            for base in row.unresolved:
                if depth < _BASE_DEPTH and self._found(base):
                    out |= self._open_bases(base, depth + 1)
                elif not self._found(base):
                    out.add(base)
        return out

    def keyword_in_releases(self, callable_name: str, keyword: str) -> KeywordAnswer:
        name = self.key(callable_name)
        found = self._found(name) if name else []
        if not found:
            return KeywordAnswer("unknown_callable", callable_name, keyword)
        pkg, row = found[0]
        first, last = _span(row.exists, self.versions[pkg])
        hit = self._seen_in(name, keyword, 0)
        if hit:
            hit_pkg, owner, mask = hit
            versions = self.versions[hit_pkg]
            k_first, k_last = _span(mask, versions)
            newest = max(versions, key=release_key)
            via = f"{hit_pkg}:{owner}" if (hit_pkg, owner) != (pkg, name) else ""
            return KeywordAnswer("in_some_release", name, keyword, hit_pkg, k_first, k_last, newest,
                                 k_last == newest, via, callable_first=first, callable_last=last)
        return KeywordAnswer("in_no_release", name, keyword, pkg, newest=max(self.versions[pkg], key=release_key),
                             takes_kwargs=any(r.var_kw for _p, r in found),
                             unresolved_bases=tuple(sorted(self._open_bases(name, 0))),
                             callable_first=first, callable_last=last)

    def present_in(self, name: str) -> tuple[str, list[str]] | None:
        """(package, the catalogued releases that define ``name``), for the first package that does."""
        found = self._found(name)
        if not found:
            return None
        pkg, row = found[0]
        return pkg, [v for i, v in enumerate(self.versions[pkg]) if row.exists >> i & 1]

    def defined_in(self, name: str) -> list[str]:
        """The packages where some catalogued release defines a public callable ``name``."""
        return [pkg for pkg, _row in self._found(name)]

    def close_keywords(self, callable_name: str, keyword: str) -> list[str]:
        """Keywords some release of the callable takes that read like ``keyword`` (a typo's fix)."""
        name = self.key(callable_name)
        params = {k for _pkg, row in self._found(name or "") for k in row.params}
        return difflib.get_close_matches(keyword, sorted(params), n=2, cutoff=0.75)


def load(path: Path) -> Catalogue:
    return Catalogue(json.loads(gzip.decompress(path.read_bytes())))


@lru_cache(maxsize=1)
def catalogue() -> Catalogue:
    try:
        raw = resources.files("bot").joinpath("data/signatures.json.gz").read_bytes()
        return Catalogue(json.loads(gzip.decompress(raw)))
    except (OSError, ValueError):
        # Classification works without it (it only sharpens usage vs environment); a broken
        # install should not stop a report.
        return Catalogue({})


def keyword_in_releases(callable_name: str, keyword: str) -> KeywordAnswer:
    """Whether any catalogued release of the stack lets ``callable_name`` take ``keyword``."""
    return catalogue().keyword_in_releases(callable_name, keyword)
