"""Unwrap compound statements: replace a statement by one of its bodies.

``if`` → its body or its else (an ``elif`` becomes an ``if``); ``try`` → its body (with or
without the finally), a handler's body, or the finally; ``with`` → its body (optionally keeping the
``as`` names as plain assignments); ``for``/``while`` → the body (a loop target bound to the first
item, when that is not larger); ``if __name__ == "__main__":`` is just an ``if``.
"""
from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from reducer.analysis.cst import assign, body_statements, collect, replace, replace_many, safe, splice
from reducer.passes.base import Gate
from reducer.passes.loops import run_targets
from reducer.passes.rewrites import drop_empty_ifs, one_iteration

_COMPOUND = (cst.If, cst.Try, cst.TryStar, cst.With, cst.For, cst.While)


class _Statements(cst.CSTVisitor):
    """Compound statements in statement position (an ``elif`` is part of its ``if``)."""

    def __init__(self) -> None:
        self.found: list[cst.CSTNode] = []
        self.elifs: set[int] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, _COMPOUND) and id(node) not in self.elifs:
            self.found.append(node)
        if isinstance(node, cst.If) and isinstance(node.orelse, cst.If):
            self.elifs.add(id(node.orelse))
        return True


def compound_statements(module: cst.Module) -> list[cst.CSTNode]:
    v = _Statements()
    module.visit(v)
    return v.found


def bodies(node: cst.CSTNode) -> list[list[cst.BaseStatement]]:
    """The statement lists ``node`` may be replaced by, smallest change first."""
    out: list[list[cst.BaseStatement]] = []
    if isinstance(node, cst.If):
        out.append(body_statements(node.body))
        if isinstance(node.orelse, cst.Else):
            out.append(body_statements(node.orelse.body))
        elif isinstance(node.orelse, cst.If):
            out.append([node.orelse.with_changes(leading_lines=())])
    elif isinstance(node, (cst.Try, cst.TryStar)):
        body = body_statements(node.body)
        final = body_statements(node.finalbody.body) if node.finalbody else []
        out.append(body)
        if final:
            out.append(body + final)
        for h in node.handlers:
            out.append(body_statements(h.body))
        if node.orelse:
            out.append(body + body_statements(node.orelse.body))
        if final:
            out.append(final)
    elif isinstance(node, cst.With):
        body = body_statements(node.body)
        out.append(body)
        binds = [assign(item.asname.name.value, item.item) for item in node.items
                 if item.asname is not None and isinstance(item.asname.name, cst.Name)]
        if binds:
            out.append(binds + body)
    elif isinstance(node, (cst.For, cst.While)):
        body = one_iteration(body_statements(node.body))
        out.append(body)
        if isinstance(node, cst.For) and node.asynchronous is None:
            # the first item, as briefly as the iterable allows: `job = jobs[0]`, else next(iter())
            indexed = cst.Subscript(node.iter, [cst.SubscriptElement(cst.Index(cst.Integer("0")))])
            first = cst.Call(cst.Name("next"), [cst.Arg(cst.Call(cst.Name("iter"), [cst.Arg(node.iter)]))])
            target = node.target.with_changes(lpar=[], rpar=[]) if isinstance(node.target, cst.Tuple) else node.target
            for value in (indexed, first):
                out.append([cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(target)], value)])] + body)
        if node.orelse is not None:
            out.append(body_statements(node.orelse.body))
    return out


def _is_main_guard(node: cst.CSTNode) -> bool:
    if not (isinstance(node, cst.If) and node.orelse is None and isinstance(node.test, cst.Comparison)):
        return False
    test = node.test
    if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [x.value for x in sides if isinstance(x, cst.Name)]
    strings = [x.evaluated_value for x in sides if isinstance(x, cst.SimpleString)]
    return names == ["__name__"] and strings == ["__main__"]


def unwrap_main_guard(source: str) -> str:
    """``if __name__ == "__main__":`` at the top level replaced by its body."""
    module = cst.parse_module(source)
    guards = [n for n in module.body if _is_main_guard(n)]
    if not guards:
        return source
    return replace_many(module, [(g, splice(body_statements(g.body), g)) for g in guards])


def alternatives(module: cst.Module, node: cst.CSTNode) -> Iterable[str | None]:
    for stmts in bodies(node):
        candidate = safe(lambda stmts=stmts: replace(module, node, splice(list(stmts), node)))
        if candidate is not None and isinstance(node, (cst.For, cst.While)):
            # `if item is None: break` became `...: pass`; without it, `item = items[0]` can
            # beat the shorter `for item in items:` header on size
            candidate = safe(lambda c=candidate: drop_empty_ifs(c))
        yield candidate


def unwrap(gate: Gate) -> None:
    """Replace each compound statement by one of its bodies.

    Removes: a compound statement's wrapper (``if``, ``try``, ``with``, ``for``, ``while``),
    replaced by one of its bodies.
    Never changes: the statements inside the body it keeps; a loop target is bound to the first
    item only when that is not larger."""
    run_targets(gate, compound_statements, alternatives)


# ---- statements that only matter for their expression ------------------------------------
def _expression_statements(module: cst.Module) -> list[cst.SimpleStatementLine]:
    """`raise X(...)`, `name = call(...)`, `return call(...)` lines whose expression may be all
    that matters: `raise SystemExit(main())` → `main()` once the call-hoisting pass made it
    `raise main()`, `peft_model = get_peft_model(m, c)` → `get_peft_model(m, c)`."""
    def want(n: cst.CSTNode) -> bool:
        if not (isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1):
            return False
        s = n.body[0]
        return (isinstance(s, cst.Raise) and s.exc is not None) or \
            (isinstance(s, (cst.Assign, cst.AnnAssign, cst.Return)) and _call_of(s.value) is not None)
    return collect(module, want)


def _call_of(value: cst.BaseExpression | None) -> cst.Call | None:
    """The call a value is, or the one call a display holds among constants (``futures =
    {pool.submit(job): 0}``, the task kept in a dict for later: ``futures`` unread, the call is
    all that matters)."""
    if isinstance(value, cst.Call):
        return value
    if not isinstance(value, (cst.Dict, cst.List, cst.Tuple, cst.Set)):
        return None
    parts: list[cst.BaseExpression] = []
    for e in value.elements:
        if isinstance(e, cst.DictElement):
            parts += [e.key, e.value]
        elif isinstance(e, cst.Element):
            parts.append(e.value)
        else:
            return None          # ``**more`` / ``*more``
    calls = [x for x in parts if isinstance(x, cst.Call)]
    rest = [x for x in parts if not isinstance(x, cst.Call)]
    if len(calls) != 1 or not all(isinstance(x, (cst.Integer, cst.Float, cst.SimpleString, cst.Name)) for x in rest):
        return None
    return calls[0]


def _as_expression(module: cst.Module, line: cst.CSTNode) -> Iterable[str | None]:
    s = line.body[0]
    expr = s.exc if isinstance(s, cst.Raise) else _call_of(s.value)
    yield safe(lambda: replace(module, s, cst.Expr(expr)))


def statement_to_expression(gate: Gate) -> None:
    """Keep only the expression of a ``raise``, an assignment of a call, or a ``return`` of a call.

    Removes: the ``raise`` around ``raise X(...)``, or the binding or ``return`` around a call (``m
    = get_peft_model(...)`` → ``get_peft_model(...)``), or around the one call of a display
    (``futures = {run(job): 0}`` → ``run(job)``).
    Never changes: the expression itself: the call and its arguments stay as they are."""
    run_targets(gate, _expression_statements, _as_expression)
