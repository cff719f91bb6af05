"""Lay out repro.py as a person would write it: imports first, PEP 8 blank lines around
definitions, no blank-line noise left by deletions, no ``pass`` where a block has other code.

``tidy`` only changes layout (blank lines, redundant ``pass``); ``format_source`` also hoists
top-level imports above the code, but only past statements that cannot matter to an import
(definitions, assignments of plain values): never past ``os.environ[...] = ...``, a
``sys.path`` change or any call. The driver still verifies the result with a run.
"""
from __future__ import annotations

import libcst as cst

from reducer.cst import is_literal


def _is_import(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.SimpleString))


def _inert(stmt: cst.CSTNode) -> bool:
    """Moving an import above this statement cannot change what the import does."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return not stmt.decorators
    if _is_docstring(stmt):
        return True
    if isinstance(stmt, cst.SimpleStatementLine):
        for s in stmt.body:
            value = s.value if isinstance(s, (cst.Assign, cst.AnnAssign)) else None
            if value is None or not is_literal(value):
                return False
            targets = s.targets if isinstance(s, cst.Assign) else [s]
            if not all(isinstance(t.target, cst.Name) for t in targets):
                return False
        return True
    return False


def hoist_imports(module: cst.Module) -> cst.Module:
    body = list(module.body)
    head: list[cst.BaseStatement] = []
    while body and (_is_docstring(body[0]) and not head) :
        head.append(body.pop(0))
    imports, rest = [], []
    blocked = False
    for stmt in body:
        if _is_import(stmt) and not blocked:
            imports.append(stmt)
        else:
            rest.append(stmt)
            if not _inert(stmt):
                blocked = True
    return module.with_changes(body=head + imports + rest)


def _blank(n: int) -> list[cst.EmptyLine]:
    return [cst.EmptyLine(indent=False) for _ in range(n)]


def _keep_comments(stmt: cst.CSTNode) -> list[cst.EmptyLine]:
    return [line for line in getattr(stmt, "leading_lines", ()) if line.comment is not None]


def _is_pass(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, cst.Pass) for s in stmt.body)


def _space(body: list[cst.BaseStatement], top: bool) -> list[cst.BaseStatement]:
    out = []
    if len(body) > 1:
        body = [s for s in body if not _is_pass(s)] or body[:1]
    for i, stmt in enumerate(body):
        lines = _keep_comments(stmt)
        if i > 0:
            prev = body[i - 1]
            is_def = isinstance(stmt, (cst.FunctionDef, cst.ClassDef))
            was_def = isinstance(prev, (cst.FunctionDef, cst.ClassDef))
            if is_def or was_def:
                lines = _blank(2 if top else 1) + lines
            elif top and not _is_import(stmt) and all(_is_import(s) or _is_docstring(s) for s in body[:i]):
                lines = _blank(1) + lines       # end of the import block at the top
        out.append(stmt.with_changes(leading_lines=lines) if hasattr(stmt, "leading_lines") else stmt)
    return out


class _Layout(cst.CSTTransformer):
    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=_space(list(updated.body), top=False))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=_space(list(updated.body), top=True),
                                    header=[h for h in updated.header if h.comment is not None],
                                    footer=[f for f in updated.footer if f.comment is not None])


def tidy(source: str) -> str | None:
    try:
        code = cst.parse_module(source).visit(_Layout()).code
    except (cst.ParserSyntaxError, cst.CSTValidationError):
        return None
    return code.rstrip("\n") + "\n" if code.strip() else code


def format_source(source: str) -> str | None:
    try:
        module = hoist_imports(cst.parse_module(source))
    except (cst.ParserSyntaxError, cst.CSTValidationError):
        return None
    return tidy(module.code)
