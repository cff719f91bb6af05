"""One element, no iteration: a loop or a comprehension over a literal one-element iterable is
written as its one step, and a one-element display read at index 0 is its element.

    for x in [a]: body                      ->  x = a; body        (also (a,), {a}, and a name bound
                                                                    once to [a] and read only here)
    for i, x in enumerate([a]): body        ->  i, x = 0, a; body  (enumerate(..., start=k): k)
    for k, v in {a: b}.items(): body        ->  k, v = a, b; body
    [f(x) for x in [a]]                     ->  [f(a)]             (also set and dict comprehensions)
    [a][0], (a,)[-1]                        ->  a
    map(f, [a])                             ->  [f(a)]             (also map(f, {a: b}.items()))
    [f(a)]  (a statement of its own)        ->  f(a)               (also {'k': f(a)}, and y = [f(a)]
                                                                    when y is not read)
    i, x = 0, a                             ->  i = 0; x = a       (not a swap: a value reading i or x)

Such iterables are what shrinking a container to the failing entry, or calling a map directly,
leaves behind; the one-step form drops a loop header (a statement) and gives later passes a plain
assignment to propagate. A loop with an ``else`` is left alone (whether it runs depends on a
``break``).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import libcst as cst

from reducer.analysis.cst import body_statements, collect, is_literal, replace, replace_many, safe, splice
from reducer.passes.base import Gate
from reducer.passes.loops import run_targets
from reducer.passes.rewrites import names_bound_inside, one_iteration, one_step, only_element, substitute


def _bare_target(target: cst.BaseAssignTargetExpression) -> cst.BaseAssignTargetExpression:
    return target.with_changes(lpar=[], rpar=[]) if isinstance(target, cst.Tuple) else target


# ---- a name bound once to a one-element display and read only as the iterable ----------------
@dataclass
class _Names:
    module: cst.Module
    uses: dict[str, int]
    bindings: dict[str, list[cst.SimpleStatementLine]]


_NAMES: list[_Names] = []


def _names(module: cst.Module) -> _Names:
    """How often each name occurs, and the lines binding it alone (``x = ...``, ``x: T = ...``);
    one walk per module, as every target of the pass asks."""
    hit = _NAMES[0] if _NAMES else None     # one read: another thread may swap the entry
    if hit is not None and hit.module is module:
        return hit
    uses: dict[str, int] = {}
    bindings: dict[str, list[cst.SimpleStatementLine]] = {}
    for n in collect(module, lambda n: isinstance(n, (cst.Name, cst.SimpleStatementLine))):
        if isinstance(n, cst.Name):
            uses[n.value] = uses.get(n.value, 0) + 1
        elif len(n.body) == 1 and isinstance(n.body[0], (cst.Assign, cst.AnnAssign)):
            stmt = n.body[0]
            targets = [t.target for t in stmt.targets] if isinstance(stmt, cst.Assign) else [stmt.target]
            if len(targets) == 1 and isinstance(targets[0], cst.Name) and stmt.value is not None:
                bindings.setdefault(targets[0].value, []).append(n)
    found = _Names(module, uses, bindings)
    _NAMES[:] = [found]
    return found


def _resolved(module: cst.Module, iterable: cst.BaseExpression) -> tuple[cst.BaseExpression, list[tuple[cst.CSTNode, Any]]]:
    """``iterable``, or, for a name bound once to a one-element display and read nowhere else,
    that display and the binding line to delete: `ORDERS = [Order(...)]` read only by
    `for o in ORDERS` is a one-step loop too."""
    if not isinstance(iterable, cst.Name):
        return iterable, []
    names = _names(module)
    lines = names.bindings.get(iterable.value, [])
    # two occurrences: the binding and this read
    if len(lines) != 1 or names.uses.get(iterable.value) != 2 or only_element(lines[0].body[0].value) is None:  # type: ignore[union-attr]
        return iterable, []
    return lines[0].body[0].value, [(lines[0], cst.RemoveFromParent())]  # type: ignore[union-attr]


# ---- loops -----------------------------------------------------------------------------------
def _loop_alternative(module: cst.Module, loop: cst.For) -> str | None:
    iterable, elsewhere = _resolved(module, loop.iter)
    value = one_step(iterable)
    if value is None or loop.orelse is not None or loop.asynchronous is not None:
        return None
    if isinstance(value, cst.Tuple) and not value.lpar and not isinstance(loop.target, cst.Tuple):
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    bind = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(_bare_target(loop.target))], value)])
    step = splice([bind] + one_iteration(body_statements(loop.body)), loop)
    return replace_many(module, [(loop, step)] + elsewhere)


# ---- comprehensions --------------------------------------------------------------------------
def _bindings(target: cst.BaseAssignTargetExpression, value: cst.BaseExpression) -> dict[str, cst.BaseExpression] | None:
    if isinstance(target, cst.Name):
        return {target.value: value}
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Tuple) \
            and len(target.elements) == len(value.elements):
        out: dict[str, cst.BaseExpression] = {}
        for t, v in zip(target.elements, value.elements):
            if not isinstance(t, cst.Element) or not isinstance(v, cst.Element):
                return None
            inner = _bindings(t.value, v.value)
            if inner is None:
                return None
            out.update(inner)
        return out
    return None


def _comprehension_alternative(module: cst.Module, comp: cst.BaseComp) -> str | None:
    for_in = comp.for_in
    if for_in.inner_for_in is not None or for_in.ifs or for_in.asynchronous is not None:
        return None
    iterable, elsewhere = _resolved(module, for_in.iter)
    value = one_step(iterable)
    values = _bindings(for_in.target, value) if value is not None else None
    if values is None:
        return None
    parts = [comp.key, comp.value] if isinstance(comp, cst.DictComp) else [comp.elt]
    if any(set(values) & names_bound_inside(p) for p in parts):
        return None
    if isinstance(comp, cst.DictComp):
        new: cst.BaseExpression = cst.Dict([cst.DictElement(substitute(comp.key, values), substitute(comp.value, values))])
    elif isinstance(comp, cst.SetComp):
        new = cst.Set([cst.Element(substitute(comp.elt, values))])
    else:
        new = cst.List([cst.Element(substitute(comp.elt, values))])
    return replace_many(module, [(comp, new.with_changes(lpar=comp.lpar, rpar=comp.rpar)
                                  if isinstance(comp, cst.ListComp) else new)] + elsewhere)


# ---- indexing, builtin map, a display as a statement -------------------------------------------
def _index_alternative(module: cst.Module, sub: cst.Subscript) -> str | None:
    only = only_element(sub.value)
    if only is None or len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return None
    index = sub.slice[0].slice.value
    spelled = cst.Module([]).code_for_node(index).replace(" ", "")
    if spelled not in ("0", "-1"):
        return None
    if isinstance(only, (cst.Tuple, cst.NamedExpr, cst.Lambda, cst.IfExp)) and not only.lpar:
        only = only.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return replace(module, sub, only)


def _map_alternative(module: cst.Module, call: cst.Call) -> str | None:
    pos = [a for a in call.args if a.keyword is None and not a.star]
    value = one_step(pos[1].value) if len(call.args) == 2 and len(pos) == 2 else None
    if value is None:
        return None
    if isinstance(value, cst.Tuple) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return replace(module, call, cst.List([cst.Element(cst.Call(pos[0].value, [cst.Arg(value)]))]))


def _kept(display: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """What is left of a one-element display whose container nobody reads: its element, or a
    one-entry dict's value when the key is a literal (evaluating it does nothing)."""
    if display is None:
        return None
    if isinstance(display, cst.Dict) and len(display.elements) == 1 and isinstance(display.elements[0], cst.DictElement):
        return display.elements[0].value if is_literal(display.elements[0].key) else None
    return only_element(display)


def _statement_alternative(module: cst.Module, stmt: cst.Expr | cst.Assign | cst.AnnAssign) -> str | None:
    # `procs = {"edge": run(...)}` -> `run(...)`: the binding goes too; if the name is still
    # read, the gate's check for unbound names refuses the candidate without a run.
    kept = _kept(stmt.value)
    return None if kept is None else replace(module, stmt, cst.Expr(kept))


def _unpacked(stmt: cst.Assign) -> list[cst.SimpleStatementLine] | None:
    """``i, x = 0, a`` (what a one-step loop leaves) as ``i = 0`` and ``x = a``, so that each name
    can be deleted or propagated on its own. Only when a value is a literal, which the constant
    passes can put where it is read: otherwise the split is a statement more and leads nowhere
    (`lo, hi = limits.lo, limits.hi`). Not when a value reads one of the names (a swap)."""
    if len(stmt.targets) != 1 or not isinstance(stmt.value, cst.Tuple) \
            or not any(isinstance(v, cst.Element) and is_literal(v.value) for v in stmt.value.elements):
        return None
    names, values = stmt.targets[0].target, stmt.value.elements
    if not isinstance(names, (cst.Tuple, cst.List)) or len(names.elements) != len(values) \
            or not all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in names.elements) \
            or not all(isinstance(v, cst.Element) for v in values):
        return None
    bound = {e.value.value for e in names.elements}  # type: ignore[union-attr]
    if any(n.value in bound for v in values for n in collect(v, lambda n: isinstance(n, cst.Name))):
        return None
    return [cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(e.value)], v.value)])
            for e, v in zip(names.elements, values)]


def _unpack_alternative(module: cst.Module, line: cst.SimpleStatementLine) -> str | None:
    split = _unpacked(line.body[0])  # type: ignore[arg-type]
    return None if split is None else replace(module, line, splice(split, line))


def _is_builtin_map(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "map"


def _is_unpacking(n: cst.CSTNode) -> bool:
    return isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1 and isinstance(n.body[0], cst.Assign) \
        and _unpacked(n.body[0]) is not None


def _wanted(module: cst.Module, n: cst.CSTNode) -> bool:
    if _is_unpacking(n):
        return True
    if isinstance(n, cst.For):
        return one_step(_resolved(module, n.iter)[0]) is not None
    if isinstance(n, (cst.ListComp, cst.SetComp, cst.DictComp)):
        return one_step(_resolved(module, n.for_in.iter)[0]) is not None
    if isinstance(n, cst.Subscript):
        return only_element(n.value) is not None
    if isinstance(n, (cst.Expr, cst.Assign, cst.AnnAssign)):
        return _kept(n.value) is not None
    return _is_builtin_map(n)


def _targets(module: cst.Module) -> list[cst.CSTNode]:
    return collect(module, lambda n: _wanted(module, n))


def single_alternatives(module: cst.Module, node: cst.CSTNode) -> Iterable[str | None]:
    if _is_unpacking(node):
        yield safe(lambda: _unpack_alternative(module, node))
    elif isinstance(node, cst.For):
        yield safe(lambda: _loop_alternative(module, node))
    elif isinstance(node, (cst.ListComp, cst.SetComp, cst.DictComp)):
        yield safe(lambda: _comprehension_alternative(module, node))
    elif isinstance(node, cst.Subscript):
        yield safe(lambda: _index_alternative(module, node))
    elif isinstance(node, (cst.Expr, cst.Assign, cst.AnnAssign)):
        yield safe(lambda: _statement_alternative(module, node))
    elif isinstance(node, cst.Call):
        yield safe(lambda: _map_alternative(module, node))


def single_element(gate: Gate) -> None:
    """Write each loop or comprehension over one literal element as its one step.

    Removes: the iteration over a literal one-element iterable (the loop or comprehension becomes
    its one step) and a one-element display read at index 0.
    Never changes: the element, or the body run for it."""
    run_targets(gate, _targets, single_alternatives)
