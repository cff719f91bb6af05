"""The libcst toolkit the passes and the rest of the reducer share: parsing (cached), the parse
and compile checks, rendering a module (mending emptied blocks), replacing nodes (rebuilding only
the replaced node's ancestors), collecting nodes in pre-order, and small node builders.

Nothing here proposes or runs a candidate: that is the passes' (reducer/passes/) and the search's
(reducer/search/judge.py, reducer/search/scheduler.py). reducer/analysis/trace.py, reducer/analysis/format.py and reducer/reduction/standalone.py use it too,
without depending on any pass.
"""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from dataclasses import fields
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import libcst as cst

T = TypeVar("T")

_PER_MODULE_LOCK = threading.Lock()


def per_module(fn: Callable[[cst.Module], T]) -> Callable[[cst.Module], T]:
    """``fn(module)`` worked out once per module object (the 8 most recent): the passes and the
    gate ask the same module many questions, and on a long script each walk costs a large part
    of a second. The module is held, so its id stays its own."""
    cache: OrderedDict[int, tuple[cst.Module, T]] = OrderedDict()

    @functools.wraps(fn)
    def once(module: cst.Module) -> T:
        with _PER_MODULE_LOCK:
            hit = cache.get(id(module))
            if hit is not None and hit[0] is module:
                cache.move_to_end(id(module))
                return hit[1]
        value = fn(module)
        with _PER_MODULE_LOCK:
            cache[id(module)] = (module, value)
            while len(cache) > 8:
                cache.popitem(last=False)
        return value

    return once


@functools.lru_cache(maxsize=64)
def parse(source: str) -> cst.Module:
    return cst.parse_module(source)


@functools.lru_cache(maxsize=4)
def parse_with_positions(source: str):
    """The module and each node's line range (libcst's PositionProvider); raises
    ``ParserSyntaxError`` when it does not parse. Cached: positions cost several parses' worth
    on a long script, and the first cut and slicing ask for the same ones."""
    from libcst.metadata import MetadataWrapper, PositionProvider
    wrapper = MetadataWrapper(parse(source), unsafe_skip_copy=True)
    return wrapper.module, wrapper.resolve(PositionProvider)


def parses(source: str, compile_check: bool = True) -> bool:
    """``compile`` accepts it (unless the original itself needs a newer Python than ours; it
    also catches `return` outside a function and the like) and libcst can parse it. compile
    comes first: it is C, and a hundred times faster on a long script."""
    return (not compile_check or compiles(source)) and libcst_parses(source)


def compiles(source: str) -> bool:
    try:
        compile(source, "<candidate>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def libcst_parses(source: str) -> bool:
    # through the cache: the text the gate checks is, once accepted, the next pass's to parse
    try:
        parse(source)
    except (cst.ParserSyntaxError, RecursionError, MemoryError):
        return False
    return True


class StatementTransformer(cst.CSTTransformer):
    """A transformer that only changes statements. Statements never sit inside an expression or
    a small statement, so it does not walk into those (most of a tree): the result is the same
    and, on a long script, the walk several times faster. Small statements themselves are still
    visited and left (``leave_Import`` runs)."""

    def on_visit(self, node: cst.CSTNode) -> bool:
        return not isinstance(node, (cst.BaseExpression, cst.BaseSmallStatement)) and super().on_visit(node)


class _FillEmptyBlocks(StatementTransformer):
    """Deleting a block's last statement must leave ``pass``, or the code no longer parses."""

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if not updated.body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        if not updated.body:
            return cst.RemoveFromParent()
        # A statement line whose last small statement lost its place keeps a dangling ';'.
        last = updated.body[-1]
        if not isinstance(last.semicolon, cst.MaybeSentinel):
            body = [*updated.body[:-1], last.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]
            return updated.with_changes(body=body)
        return updated


def render(module: cst.Module) -> str:
    return module.visit(_FillEmptyBlocks()).code


def replace(module: cst.Module, old: cst.CSTNode, new: cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel) -> str:
    """The source of ``module`` with node ``old`` (by identity) replaced by ``new``."""
    if isinstance(new, cst.CSTNode) and _renders_as_is(module):
        # The rest of the module needs no mending: mend only the new subtree and its ancestors.
        mended = new.visit(_FillEmptyBlocks())
        if isinstance(mended, cst.CSTNode):
            rebuilt = _replace_on_path(module, old, mended, mend=_mend_one)
            if rebuilt is not None:
                return rebuilt.code
    return render(module.visit(_Replace(old, new)))


_MENDER = _FillEmptyBlocks()


def _mend_one(node: cst.CSTNode) -> cst.CSTNode:
    """``_FillEmptyBlocks``' rule for one rebuilt ancestor (never emptied: it holds the new node)."""
    if isinstance(node, cst.IndentedBlock):
        return _MENDER.leave_IndentedBlock(node, node)
    if isinstance(node, cst.SimpleStatementLine) and node.body:
        return _MENDER.leave_SimpleStatementLine(node, node)
    return node


@per_module
def _renders_as_is(module: cst.Module) -> bool:
    """True when rendering ``module`` changes nothing (no empty block, no dangling ';'): true of
    every module after the first accepted candidate."""
    return render(module) == module.code


# node id -> (parent, field name, index in the field's sequence or None), per module: a candidate
# then rebuilds only the nodes from the replaced one up to the module (a few dozen) instead of
# the whole tree, which on the worker script was most of reprobot's own CPU per candidate.
@per_module
def _parents(module: cst.Module) -> dict[int, tuple[cst.CSTNode, str, int | None]] | None:
    """Each node's place in ``module``; None when some node object sits in two places (then
    only a full walk replaces every occurrence, as ``_Replace`` does)."""
    places: dict[int, tuple[cst.CSTNode, str, int | None]] | None = {}
    stack: list[cst.CSTNode] = [module]
    while stack and places is not None:
        node = stack.pop()
        for name in _node_fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                items: Iterable[tuple[int | None, Any]] = ((None, value),)
            elif isinstance(value, (tuple, list)):
                items = enumerate(value)
            else:
                continue
            for index, child in items:
                if not isinstance(child, cst.CSTNode):
                    continue
                if id(child) in places:
                    places = None
                    break
                places[id(child)] = (node, name, index)
                stack.append(child)
            if places is None:
                break
    return places


@functools.lru_cache(maxsize=None)
def _node_fields(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))


def _replace_on_path(module: cst.Module, old: cst.CSTNode, new: cst.CSTNode,
                     mend: Callable[[cst.CSTNode], cst.CSTNode] | None = None) -> cst.Module | None:
    """``module`` with ``old`` replaced by ``new``, rebuilding only ``old``'s ancestors (each one
    validated by libcst as it is rebuilt, then ``mend``-ed); None when the places are unknown."""
    places = _parents(module)
    if places is None or id(old) not in places:
        return None
    node, replacement = old, (_parenthesize(new) if type(new) is not type(old) else new)
    while node is not module:
        parent, name, index = places[id(node)]
        if index is None:
            value: Any = replacement
        else:
            seq = getattr(parent, name)
            value = type(seq)([*seq[:index], replacement, *seq[index + 1:]])
        node, replacement = parent, parent.with_changes(**{name: value})
        if mend is not None:
            replacement = mend(replacement)
    return replacement


def replace_many(module: cst.Module, pairs: list[tuple[cst.CSTNode, Any]]) -> str:
    """Several nodes replaced in one candidate (inlining touches a definition and a call site)."""
    return render(module.visit(_ReplaceMany({id(old): new for old, new in pairs})))


class _ReplaceMany(cst.CSTTransformer):
    def __init__(self, mapping: dict[int, Any]) -> None:
        self.mapping = mapping

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) not in self.mapping and super().on_visit(node)

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> Any:
        if id(original) in self.mapping:
            return self.mapping[id(original)]
        return super().on_leave(original, updated)


class _Replace(cst.CSTTransformer):
    def __init__(self, old: cst.CSTNode, new: Any) -> None:
        self.old, self.new = old, new

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node is not self.old and super().on_visit(node)

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> Any:
        if original is self.old:
            return _parenthesize(self.new) if type(self.new) is not type(original) else self.new
        return super().on_leave(original, updated)


# Expressions that are only valid bare in some positions: `[x for x in lambda: ()]` and
# `[x for x in a if b else c]` do not parse, their parenthesised forms do; a generator taken out of
# `sum(x for x in y)` needs the parentheses the call gave it.
_LOOSE = (cst.Lambda, cst.IfExp, cst.NamedExpr, cst.Yield, cst.GeneratorExp)


def _parenthesize(node: Any) -> Any:
    if isinstance(node, _LOOSE) and not node.lpar:
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return node


class _Collect(cst.CSTVisitor):
    def __init__(self, want: Callable[[cst.CSTNode], bool]) -> None:
        self.want, self.found = want, []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.want(node):
            self.found.append(node)
        return True


# Nodes no statement sits inside: a walk for statements need not enter them
_NO_STATEMENTS = (cst.BaseExpression, cst.BaseSmallStatement, cst.EmptyLine, cst.TrailingWhitespace,
                  cst.BaseParenthesizableWhitespace, cst.Decorator, cst.Parameters)


class _CollectStatements(_Collect):
    def on_visit(self, node: cst.CSTNode) -> bool:
        super().on_visit(node)
        return not isinstance(node, _NO_STATEMENTS)


def collect_statements(module: cst.CSTNode, want: Callable[[cst.CSTNode], bool]) -> list[Any]:
    """Statements satisfying ``want``, in pre-order. The walk stops where no statement can be
    (expressions, small statements, whitespace): on a long script, a fraction of a full walk."""
    c = _CollectStatements(want)
    module.visit(c)
    return c.found


def collect(module: cst.CSTNode, want: Callable[[cst.CSTNode], bool]) -> list[Any]:
    """Nodes satisfying ``want``, in pre-order."""
    if isinstance(module, cst.Module):
        return [n for n in _preorder(module) if want(n)]
    c = _Collect(want)
    module.visit(c)
    return c.found


@per_module
def _preorder(module: cst.Module) -> list[cst.CSTNode]:
    """Every node of a module in pre-order, walked once per module."""
    c = _Collect(lambda _node: True)
    module.visit(c)
    return c.found


def safe(build: Callable[[], str | None]) -> str | None:
    """Build one candidate; a node libcst refuses to construct is just not a candidate."""
    try:
        return build()
    except (cst.CSTValidationError, cst.ParserSyntaxError, ValueError, TypeError, AttributeError):
        return None


def statement_list(owner: cst.CSTNode) -> Sequence[cst.CSTNode]:
    return owner.body  # Module, IndentedBlock, SimpleStatementLine all keep statements in .body


def set_body(owner: cst.CSTNode, items: list[cst.CSTNode]) -> cst.CSTNode:
    return owner.with_changes(body=items)


def root_name(expr: cst.CSTNode) -> str | None:
    """The variable an attribute/item/call chain starts from: ``a`` in ``a.b[0].c()``."""
    while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def called_name(func: cst.BaseExpression) -> str | None:
    """The name a call is spelled with: ``spawn`` in ``mp.spawn(...)`` and in ``spawn(...)``."""
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def is_literal(node: cst.BaseExpression) -> bool:
    """A value-only expression: numbers, strings, True/False/None, and containers of those."""
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)):
        return True
    if isinstance(node, cst.ConcatenatedString):
        return is_literal(node.left) and is_literal(node.right)
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return is_literal(node.expression)
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return all(isinstance(e, cst.Element) and is_literal(e.value) for e in node.elements)
    if isinstance(node, cst.Dict):
        return all(isinstance(e, cst.DictElement) and is_literal(e.key) and is_literal(e.value)
                   for e in node.elements)
    return False


def body_statements(suite: cst.BaseSuite) -> list[cst.BaseStatement]:
    """The statements of a suite as full lines, ready to splice into a parent block."""
    if isinstance(suite, cst.IndentedBlock):
        return list(suite.body)
    return [cst.SimpleStatementLine(body=list(suite.body))]


def splice(stmts: list[cst.BaseStatement], like: cst.BaseStatement) -> cst.FlattenSentinel | cst.RemovalSentinel:
    """Put ``stmts`` where ``like`` was; the first keeps ``like``'s leading comments/blank lines."""
    stmts = [s for s in stmts if not _is_pass(s)]
    if not stmts:
        return cst.RemoveFromParent()
    first = stmts[0]
    if hasattr(first, "leading_lines") and hasattr(like, "leading_lines"):
        stmts[0] = first.with_changes(leading_lines=like.leading_lines)
    return cst.FlattenSentinel(stmts)


def _is_pass(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Pass))


def simple(node: cst.BaseSmallStatement) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(body=[node])


def assign(name: str, value: cst.BaseExpression) -> cst.SimpleStatementLine:
    return simple(cst.Assign(targets=[cst.AssignTarget(cst.Name(name))], value=value))
