"""Lay out repro.py as a person would write it: imports first, PEP 8 blank lines around
definitions, no blank-line noise left by deletions, no ``pass`` where a block has other code.

``tidy`` only changes layout (blank lines, redundant ``pass``); ``format_source`` also hoists
top-level imports above the code, but only past statements that cannot matter to an import
(definitions, assignments of plain values): never past ``os.environ[...] = ...``, a
``sys.path`` change or any call. The driver still verifies the result with a run.
"""
from __future__ import annotations

import libcst as cst

from reducer.analysis.cst import is_literal


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
    code = lay_out_statements(code) or code
    return code.rstrip("\n") + "\n" if code.strip() else code


def format_source(source: str) -> str | None:
    try:
        module = hoist_imports(cst.parse_module(source))
    except (cst.ParserSyntaxError, cst.CSTValidationError):
        return None
    return tidy(module.code)


# ---- long statements -----------------------------------------------------------------------------
# A candidate that inlined a value keeps that value's old line breaks wherever it lands, and one
# that spelled a dict as keywords writes them on one line: laid out again, a call too long for
# one line gets one argument a line, as black would, and the rest is one line each.
LINE_LIMIT = 99


def _pw(spaces: int) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
                                       last_line=cst.SimpleWhitespace(" " * spaces))


class _OneLine(cst.CSTTransformer):
    """The expression on one line: no whitespace after an opening bracket or before a closing
    one, one space after a comma."""

    def leave_ParenthesizedWhitespace(self, original, updated):
        return cst.SimpleWhitespace("")

    def leave_Comma(self, original, updated):
        if isinstance(updated.whitespace_after, cst.SimpleWhitespace) and updated.whitespace_after.value == "":
            return updated.with_changes(whitespace_after=cst.SimpleWhitespace(" "), whitespace_before=cst.SimpleWhitespace(""))
        return updated.with_changes(whitespace_before=cst.SimpleWhitespace(""))

    def leave_Arg(self, original, updated):
        return updated.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))

    # On one line a trailing comma is noise (a one-element tuple keeps its own).
    def leave_Call(self, original, updated):
        return updated.with_changes(args=_without_trailing_comma(updated.args))

    def leave_Dict(self, original, updated):
        return updated.with_changes(elements=_without_trailing_comma(updated.elements))

    leave_List = leave_Set = leave_Dict

    def leave_Tuple(self, original, updated):
        if len(updated.elements) > 1:
            return self.leave_Dict(original, updated)
        only = updated.elements[0] if updated.elements else None
        if only is not None and isinstance(only.comma, cst.Comma):
            return updated.with_changes(elements=[only.with_changes(
                comma=only.comma.with_changes(whitespace_after=cst.SimpleWhitespace("")))])
        return updated


def _without_trailing_comma(items):
    items = list(items)
    if items and isinstance(items[-1].comma, cst.Comma):
        items[-1] = items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return items


def _comma(i: int, n: int, inner: int, outer: int) -> cst.Comma:
    """The separator after item ``i`` of ``n`` when each goes on its own line: the last one too
    (black's trailing comma), followed by the closing bracket's line."""
    return cst.Comma(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=_pw(inner if i < n - 1 else outer))


class _Wrap:
    """One item a line inside the outermost bracket that is too long, recursively."""

    def __init__(self, module: cst.Module, column: int) -> None:
        self.module, self.column = module, column      # the block's indentation, in columns

    def fits(self, node: cst.CSTNode, extra: int, prefix: int = 0) -> bool:
        return self.column + extra + prefix + len(self.module.code_for_node(node)) + 1 <= LINE_LIMIT

    def wrap(self, node: cst.BaseExpression, extra: int) -> cst.BaseExpression:
        inner = extra + 4
        if isinstance(node, cst.Call) and node.args and not any(isinstance(a.value, cst.GeneratorExp) for a in node.args):
            args = [self._item(a, inner, a.value, "value") for a in node.args]
            n = len(args)
            args = [a.with_changes(comma=_comma(i, n, inner, extra), whitespace_after_arg=cst.SimpleWhitespace(""))
                    for i, a in enumerate(args)]
            return node.with_changes(args=args, whitespace_before_args=_pw(inner),
                                     func=self._maybe(node.func, extra))
        if isinstance(node, (cst.Dict, cst.List, cst.Set, cst.Tuple)) and node.elements and (
                not isinstance(node, cst.Tuple) or node.lpar):
            elements = [self._item(e, inner, e.value, "value") for e in node.elements]
            n = len(elements)
            elements = [e.with_changes(comma=_comma(i, n, inner, extra)) for i, e in enumerate(elements)]
            if isinstance(node, cst.Dict):
                return node.with_changes(elements=elements, lbrace=cst.LeftCurlyBrace(whitespace_after=_pw(inner)),
                                         rbrace=cst.RightCurlyBrace())
            if isinstance(node, cst.List):
                return node.with_changes(elements=elements, lbracket=cst.LeftSquareBracket(whitespace_after=_pw(inner)),
                                         rbracket=cst.RightSquareBracket())
            if isinstance(node, cst.Set):
                return node.with_changes(elements=elements, lbrace=cst.LeftCurlyBrace(whitespace_after=_pw(inner)),
                                         rbrace=cst.RightCurlyBrace())
            return node.with_changes(elements=elements, lpar=[cst.LeftParen(whitespace_after=_pw(inner))],
                                     rpar=[cst.RightParen()])
        return node

    def _maybe(self, func: cst.BaseExpression, extra: int) -> cst.BaseExpression:
        # `Model.from_pretrained(...)(x)`: a call in the callee is laid out only if it is too long itself
        if isinstance(func, cst.Call) and not self.fits(func, extra):
            return self.wrap(func, extra)
        return func

    def _item(self, item, inner: int, value: cst.BaseExpression, field: str):
        prefix = len(self.module.code_for_node(item)) - len(self.module.code_for_node(value))
        if self.fits(item, inner) or not isinstance(value, (cst.Call, cst.Dict, cst.List, cst.Set, cst.Tuple)):
            return item
        return item.with_changes(**{field: self.wrap(value, inner)})


def _outer_value(stmt: cst.BaseSmallStatement) -> tuple[str, cst.BaseExpression] | None:
    """The expression a statement is laid out by: an assignment's, a return's or a bare call's."""
    v = getattr(stmt, "value", None)
    return ("value", v) if isinstance(v, cst.BaseExpression) else None


class _LayOut(cst.CSTTransformer):
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.indents: list[str] = []

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.indents.append(node.indent if node.indent is not None else self.module.default_indent)

    def leave_IndentedBlock(self, original, updated):
        self.indents.pop()
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        code = self.module.code_for_node(original)
        lines = [line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        column = sum(len(i) for i in self.indents)
        if len(original.body) != 1 or len(lines) < 1:
            return updated
        body = code.strip("\n")
        if "#" in body.split("\n", 1)[-1] or '"""' in body or "'''" in body:
            return updated          # a comment or a long string inside: leave the person's layout
        if len(lines) == 1 and column + len(lines[0].rstrip()) <= LINE_LIMIT:
            return updated
        got = _outer_value(updated.body[0])
        if got is None or not isinstance(got[1], (cst.Call, cst.Dict, cst.List, cst.Set, cst.Tuple)):
            return updated          # an operator chain, a string: the person's own breaks stay
        stmt = updated.body[0].visit(_OneLine())
        wrap = _Wrap(self.module, column)
        if wrap.fits(stmt, 0):
            return updated.with_changes(body=[stmt])
        field, value = _outer_value(stmt)
        return updated.with_changes(body=[stmt.with_changes(**{field: wrap.wrap(value, 0)})])


def lay_out_statements(source: str) -> str | None:
    """Multi-line and over-long simple statements laid out again (see ``_LayOut``)."""
    try:
        module = cst.parse_module(source)
        return module.visit(_LayOut(module)).code
    except (cst.ParserSyntaxError, cst.CSTValidationError, ValueError):
        return None
