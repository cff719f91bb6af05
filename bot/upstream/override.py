"""A library's call that bound to someone else's override: who owns a call its callee rejected.

``TypeError: DPOTrainer.log() takes 2 positional arguments but 3 were given``, raised where
transformers' ``Trainer._maybe_log_save_evaluate`` calls ``self.log(logs, start_time)``: the call is
transformers' own, made on its own object with its own method's arguments; the function that
rejected them is trl's ``DPOTrainer.log``, an override of ``Trainer.log`` that did not follow its
signature. The override's owner fixes that (trl did, in 0.13.0), not the caller. The same shape
with the user's own subclass (``class MyTrainer(Trainer)`` overriding ``log``) is the user's code.
A library calling its own method with the wrong arguments (the message names the library's own
class) is no override: the caller's bug, as routing's boundary rule already says.

Who defined the override is read offline, from what routing already reads: the user's classes in
repro.py and in the user's files on the path; a package's from the signatures catalogue
(bot/data/signatures.json.gz: every public class and method of the stack's catalogued releases),
then the targets' callee names.
"""
from __future__ import annotations

import ast
import linecache
import re
from dataclasses import dataclass

from bot import targets as registry
from bot.upstream.failure import PathFrame, classes_of, enclosing_class
from bot.upstream.signatures import catalogue

USER = "user code"          # the candidate routing names for the user's own code


@dataclass(frozen=True)
class Override:
    caller: str             # the package whose code made the call (``transformers``)
    where: str              # its frame: ``transformers/trainer.py:_maybe_log_save_evaluate``
    method: str             # the override as the message names it: ``DPOTrainer.log``
    owner: str              # the package that defines the override, or USER
    base: str | None        # what it overrides, when the caller's class is known: ``Trainer.log``

    @property
    def owner_text(self) -> str:
        """``trl's`` / ``the user's``: whose override, as a reason reads it."""
        return "the user's" if self.owner == USER else f"{self.owner}'s"

    @property
    def name(self) -> str:
        return self.method.rsplit(".", 1)[-1]


def _line(pf: PathFrame) -> str:
    """The frame's source line: as the traceback printed it, else from the file on this machine."""
    if pf.frame.line:
        return pf.frame.line
    return linecache.getline(pf.frame.path, pf.frame.lineno) if pf.frame.lineno else ""


def _user_classes(frames: list[PathFrame], repro_source: str | None) -> set[str]:
    """Classes the user's code defines: repro.py's, and those of the user's files on the path
    that are on this machine (a paste from the machine it ran on)."""
    names: set[str] = set()
    if repro_source:
        try:
            names |= {n.name for n in ast.walk(ast.parse(repro_source)) if isinstance(n, ast.ClassDef)}
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    for pf in frames:
        if pf.package is None:
            names |= {c[2] for c in classes_of(pf.frame.path)}
    return names


def _package_of_class(cls: str, method: str) -> list[str]:
    """The packages that define ``cls.method`` (or the class ``cls``), catalogue first."""
    cat = catalogue()
    found = cat.defined_in(f"{cls}.{method}") or cat.defined_in(cls)
    if not found and (named := registry.callee_packages().get(cls)):
        found = [named]
    return [p for p in found if registry.known_owner(p)]


def find_override(frames: list[PathFrame], callee: str, repro_source: str | None) -> Override | None:
    """The override a library's rejected call bound to, or None: the message names ``Class.method``
    (Python 3.10+ names the qualified function), the innermost frame is a package's code calling
    ``self.method(...)``/``cls.method(...)``, and ``Class`` is the user's or another package's."""
    parts = [p for p in callee.split(".") if p and not p.startswith("<")]
    if len(parts) < 2 or not parts[-2][:1].isupper() or not frames:
        return None
    cls, method = parts[-2], parts[-1]
    inner = frames[-1]
    if inner.package is None or not re.search(rf"\b(?:self|cls)\.{re.escape(method)}\s*\(", _line(inner)):
        return None     # not a call a library made on its own object: the boundary rule's case
    if cls in _user_classes(frames, repro_source):
        owner = USER
    else:
        found = _package_of_class(cls, method)
        # the caller's own class (``Trainer.log`` called from transformers): no override
        if not found or inner.package in found:
            return None
        owner = found[0]
    own = enclosing_class(inner.frame.path, inner.frame.lineno)
    return Override(inner.package, f"{inner.rel}:{inner.frame.func}", f"{cls}.{method}", owner,
                    f"{own}.{method}" if own and own != cls else None)
