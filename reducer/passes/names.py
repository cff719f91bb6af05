"""Which names a script reads that nothing in it binds.

The gate uses this to refuse, without a run, a candidate that unbinds a name the script still
reads (deleting ``x = load()`` while ``f(x)`` stays): once the first cut has removed the code
that never ran, such a candidate almost always dies of a ``NameError`` before reaching the
failure, and on a GPU that is 10-60 seconds for nothing. The analysis is coarse on purpose
(one namespace for the whole module): it can only miss a NameError, never invent one for a
name that is bound anywhere.
"""
from __future__ import annotations

import builtins

import libcst as cst

from reducer.passes.constants import binding_counts

_MODULE_NAMES = {"__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__",
                 "__builtins__", "__path__", "__annotations__", "__dict__", "__class__",
                 "__qualname__", "__module__"}
_KNOWN = set(dir(builtins)) | _MODULE_NAMES


class _Reads(cst.CSTVisitor):
    """Name nodes that are variable reads (not attributes, keywords, or import paths)."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.skip: set[int] = set()
        self.star_import = False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if isinstance(node.names, cst.ImportStar):
            self.star_import = True
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self.skip:
            self.reads.add(node.value)


def unbound_reads(module: cst.Module) -> set[str] | None:
    """Names read somewhere and bound nowhere (builtins aside); None when a star import or
    dynamic namespace makes the question unanswerable."""
    v = _Reads()
    module.visit(v)
    if v.star_import:
        return None
    return v.reads - set(binding_counts(module)) - _KNOWN
