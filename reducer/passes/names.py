"""Which names a script reads that nothing in it binds.

The gate uses this to refuse, without a run, a candidate that unbinds a name the script still
reads (deleting ``x = load()`` while ``f(x)`` stays): once the first cut has removed the code
that never ran, such a candidate almost always dies of a ``NameError`` before reaching the
failure, and on a GPU that is 10-60 seconds for nothing. The analysis is coarse on purpose
(one namespace for the whole module): it can only miss a NameError, never invent one for a
name that is bound anywhere.
"""
from __future__ import annotations

import ast
import builtins


_MODULE_NAMES = {"__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__",
                 "__builtins__", "__path__", "__annotations__", "__dict__", "__class__",
                 "__qualname__", "__module__"}
_KNOWN = set(dir(builtins)) | _MODULE_NAMES


def _bound_by(node: ast.AST) -> list[str]:
    """Names ``node`` binds, whatever the scope (the analysis has one namespace)."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.alias):
        return [node.asname or node.name.split(".")[0]]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    name = getattr(node, "name", None)  # type parameters (3.12+) and the like
    return [name] if isinstance(name, str) and not isinstance(node, ast.alias) else []


def unbound_reads(source: str) -> frozenset[str] | None:
    """Names read somewhere and bound nowhere (builtins aside); None when a star import makes
    the question unanswerable, or the source does not parse. Python's own parser, not libcst:
    the gate asks this of every candidate, and on a script of thousands of lines a libcst walk
    costs a second where ``ast`` costs milliseconds."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    reads: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.add(node.id)
        else:
            bound.update(_bound_by(node))
    return frozenset(reads - bound - _KNOWN)
