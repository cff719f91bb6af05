"""Scaffolding a person leaves out of a repro: type annotations, builtin higher-order calls, a
method reached once, a helper's comprehension over what is one element in the failing run.

    def complete(self, req: ChatRequest) -> ChatResponse:  ->  def complete(self, req):
    x: Settings = build()                                  ->  x = build()
    list(map(f, xs))       (a statement of its own)        ->  f(xs[0])
    ys = list(map(f, xs))                                  ->  ys = [f(xs[0])]
    filter(p, xs), sorted(xs, key=k), min/max(xs, key=k)   ->  p(xs[0]), k(xs[0])
    functools.reduce(f, xs, init)                          ->  f(init, xs[0])
    class C: def m(self, a): body;  c.m(x)                 ->  def m(a): body;  m(x)   (self unused)
                                                           ->  def m(self, a): body;  m(c, x)
    [g(i) for i in range(n)]                               ->  [g(0)]      (xs: [g(xs[0])])

Each is a guess the oracle checks: ``xs[0]`` is the element only when the failing run had one
(or the first one fails), so a candidate that fails differently is simply not accepted. What is
freed (a class, an import, a TypeVar only annotations named; a parameter nobody reads) goes in
the passes after this one (cleanup, drop_unused_parameters, inline_functions).
"""
from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from reducer.analysis.cst import collect, replace, replace_many, safe
from reducer.passes.base import Gate
from reducer.passes.loops import run_targets, together_then_each
from reducer.passes.rewrites import first_element, names_bound_inside, one_step, substitute


# ---- annotations -------------------------------------------------------------------------------
def _class_bodies(module: cst.Module) -> set[int]:
    """ids of statements that sit directly in a class body: a class's annotations are its fields
    (a dataclass, a NamedTuple, a TypedDict), never dropped."""
    out: set[int] = set()
    for cls in collect(module, lambda n: isinstance(n, cst.ClassDef)):
        if isinstance(cls.body, cst.IndentedBlock):
            for stmt in cls.body.body:
                out.add(id(stmt))
                if isinstance(stmt, cst.SimpleStatementLine):
                    out.update(id(s) for s in stmt.body)
    return out


class _DropAnnotations(cst.CSTTransformer):
    def __init__(self, keep: set[int], only: cst.CSTNode | None = None) -> None:
        self.keep, self.only, self.inside = keep, only, only is None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if node is self.only:
            self.inside = True
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if original is self.only:
            self.inside = False
            return updated.with_changes(returns=None)
        return updated.with_changes(returns=None) if self.only is None else updated

    def leave_Param(self, original: cst.Param, updated: cst.Param) -> cst.Param:
        if not self.inside or updated.annotation is None:
            return updated
        if updated.default is not None:     # `b: int = 1` -> `b=1`
            return updated.with_changes(annotation=None, equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
        return updated.with_changes(annotation=None)

    def leave_AnnAssign(self, original: cst.AnnAssign, updated: cst.AnnAssign):
        if id(original) in self.keep or self.only is not None and original is not self.only:
            return updated
        if updated.value is None:
            return cst.RemoveFromParent()   # `x: int` outside a class binds nothing
        return cst.Assign([cst.AssignTarget(updated.target)], updated.value)


def _annotated(module: cst.Module) -> list[cst.CSTNode]:
    keep = _class_bodies(module)
    return collect(module, lambda n: (isinstance(n, cst.FunctionDef) and (n.returns is not None or any(
        p.annotation is not None for p in [*n.params.params, *n.params.kwonly_params, *n.params.posonly_params,
                                           *([n.params.star_arg] if isinstance(n.params.star_arg, cst.Param) else []),
                                           *([n.params.star_kwarg] if n.params.star_kwarg else [])])))
                   or (isinstance(n, cst.AnnAssign) and id(n) not in keep))


def without_annotations(module: cst.Module, only: cst.CSTNode | None = None) -> str | None:
    from reducer.analysis.cst import render
    new = render(module.visit(_DropAnnotations(_class_bodies(module), only)))
    return None if new == module.code else new


def drop_annotations(gate: Gate) -> None:
    """Drop type annotations: parameters', returns', variables' (``x: T = v`` becomes ``x = v``),
    all at once first, then function by function. Never a class body's (those are a dataclass's
    fields), never a value. The classes, imports and TypeVars only annotations named are then
    unused, and cleanup removes them.

    Removes: type annotations of parameters, returns and variables.
    Never changes: a class body's annotations (a dataclass's fields), or any value."""
    together_then_each(gate, _annotated, lambda m, n: [safe(lambda: without_annotations(m, n))],
                       lambda m: safe(lambda: without_annotations(m)))


# ---- builtin higher-order calls ----------------------------------------------------------------
_WRAPPERS = {"list", "tuple", "set", "frozenset"}


def _callee(call: cst.Call) -> str | None:
    f = call.func
    if isinstance(f, cst.Name):
        return f.value
    if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "functools":
        return "functools." + f.attr.value
    return None


def _positional(call: cst.Call) -> list[cst.BaseExpression] | None:
    if any(a.star for a in call.args):
        return None
    return [a.value for a in call.args if a.keyword is None]


def _keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def _callable(fn: cst.BaseExpression) -> cst.BaseExpression:
    """``fn`` as it can stand before ``(...)``: a lambda in parentheses."""
    if isinstance(fn, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or fn.lpar:
        return fn
    return fn.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def direct_form(call: cst.Call) -> tuple[cst.BaseExpression, bool] | None:
    """(the direct call that stands for the higher-order ``call`` on its first element, whether
    its value can replace the whole call's value as a list of one)."""
    name, pos = _callee(call), _positional(call)
    if name is None or pos is None:
        return None
    if name in ("map", "filter") and len(pos) == 2 and len(call.args) == 2:
        return cst.Call(_callable(pos[0]), [cst.Arg(first_element(pos[1]))]), name == "map"
    if name in ("sorted", "min", "max") and len(pos) == 1:
        key = _keyword(call, "key")
        if key is not None:
            return cst.Call(_callable(key), [cst.Arg(first_element(pos[0]))]), False
    if name in ("functools.reduce", "reduce") and len(pos) in (2, 3) and len(call.args) == len(pos):
        first = first_element(pos[1])
        if len(pos) == 3:
            return cst.Call(_callable(pos[0]), [cst.Arg(pos[2]), cst.Arg(first)]), False
        second = cst.Subscript(first.value, [cst.SubscriptElement(cst.Index(cst.Integer("1")))]) \
            if isinstance(first, cst.Subscript) else None
        return (cst.Call(_callable(pos[0]), [cst.Arg(first), cst.Arg(second)]), False) if second is not None else None
    return None


def _higher_order(module: cst.Module) -> list[cst.Call]:
    return collect(module, lambda n: isinstance(n, cst.Call) and direct_form(n) is not None)


def _statement_of(module: cst.Module, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """The one-statement line whose value (an expression, an assignment's or a return's) is
    ``node`` or ``list(node)``."""
    for line in collect(module, lambda n: isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1):
        s = line.body[0]
        value = getattr(s, "value", None)
        if value is None:
            continue
        if value is node or (isinstance(value, cst.Call) and _callee(value) in _WRAPPERS and len(value.args) == 1
                             and value.args[0].value is node):
            return line
    return None


def _wrapper_of(module: cst.Module, node: cst.Call) -> cst.Call | None:
    found = collect(module, lambda n: isinstance(n, cst.Call) and _callee(n) in _WRAPPERS and len(n.args) == 1
                    and n.args[0].value is node)
    return found[0] if found else None


def _higher_order_alternatives(module: cst.Module, call: cst.CSTNode) -> Iterable[str | None]:
    got = direct_form(call)  # type: ignore[arg-type]
    if got is None:
        return
    direct, listed = got
    line = _statement_of(module, call)
    if line is not None:
        # the call is the statement: it is made, its value is not what fails
        yield safe(lambda: replace(module, line, line.with_changes(body=[cst.Expr(direct)])))
    if listed:
        outer = _wrapper_of(module, call) or call
        yield safe(lambda: replace(module, outer, cst.List([cst.Element(direct)])))


def direct_higher_order(gate: Gate) -> None:
    """``map``, ``filter``, ``sorted``/``min``/``max`` with ``key=``, ``functools.reduce`` (and
    ``list(...)`` of them) over what was one element in the failing run: the callable called on
    that element directly. Never changes which callable is called nor with what (the first
    element, or the reduce's initial value and first element).

    Removes: a builtin higher-order call over what is one element in the failing run (``list(map(f,
    xs))`` → ``f(xs[0])``).
    Never changes: the function applied or the element it is applied to."""
    run_targets(gate, _higher_order, _higher_order_alternatives)


# ---- a method reached once ---------------------------------------------------------------------
def _reads(node: cst.CSTNode, name: str) -> bool:
    return bool(collect(node, lambda n: isinstance(n, cst.Name) and n.value == name))


def _methods(module: cst.Module) -> list[tuple[cst.ClassDef, cst.FunctionDef]]:
    out = []
    top = {getattr(s, "name", None) and s.name.value for s in module.body}      # type: ignore[union-attr]
    defs: dict[str, int] = {}
    for fn in collect(module, lambda n: isinstance(n, cst.FunctionDef)):
        defs[fn.name.value] = defs.get(fn.name.value, 0) + 1
    for cls in module.body:
        if not isinstance(cls, cst.ClassDef) or not isinstance(cls.body, cst.IndentedBlock):
            continue
        for fn in cls.body.body:
            if not isinstance(fn, cst.FunctionDef) or fn.decorators or fn.asynchronous is not None:
                continue
            name = fn.name.value
            if name.startswith("__") or defs.get(name) != 1 or name in top or not fn.params.params:
                continue
            if _reads(fn, "super") or _reads(fn, "__class__"):
                continue
            out.append((cls, fn))
    return out


def method_targets(module: cst.Module) -> list[cst.FunctionDef]:
    """The methods ``as_function`` may make plain functions: each named by one attribute, the
    call of it (heavy.py's level takes them all too)."""
    found = []
    for cls, fn in _methods(module):
        refs = collect(module, lambda n, f=fn: isinstance(n, cst.Attribute) and n.attr.value == f.name.value)
        calls = collect(module, lambda n, f=fn: isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                        and n.func.attr.value == f.name.value)
        if len(refs) == 1 and len(calls) == 1:
            found.append(fn)
    return found


def as_function(module: cst.Module, fn: cst.FunctionDef, keep_self: bool) -> str | None:
    cls = next(c for c, f in _methods(module) if f is fn)
    call = collect(module, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                   and n.func.attr.value == fn.name.value)[0]
    self_param = fn.params.params[0]
    if not keep_self and _reads(fn.body, self_param.name.value):
        return None
    params = fn.params if keep_self else fn.params.with_changes(params=fn.params.params[1:])
    plain = fn.with_changes(params=params, leading_lines=[])
    args = ([cst.Arg(call.func.value)] if keep_self else []) + [a for a in call.args]
    body = [s for s in cls.body.body if s is not fn]   # type: ignore[union-attr]
    if not body:
        body = [cst.SimpleStatementLine([cst.Pass()])]
    new_cls = cls.with_changes(body=cls.body.with_changes(body=body))
    return replace_many(module, [(cls, cst.FlattenSentinel([new_cls, plain])),
                                 (call, call.with_changes(func=cst.Name(fn.name.value), args=args))])


def _method_alternatives(module: cst.Module, fn: cst.CSTNode) -> Iterable[str | None]:
    yield safe(lambda: as_function(module, fn, keep_self=False))   # type: ignore[arg-type]
    yield safe(lambda: as_function(module, fn, keep_self=True))    # type: ignore[arg-type]


def methods_to_functions(gate: Gate) -> None:
    """A method called once (``obj.m(x)``, the only reference to any ``m``) becomes a plain
    function after its class: ``m(x)`` when it never reads ``self``, else ``m(obj, x)``. Then it
    is a function called once, which inline_functions can inline, and the class may be empty.
    Never a dunder, a decorated method (property, classmethod, staticmethod), one that calls
    ``super()``, or a name that is also a top-level name; never changes the body.

    Removes: the class around a method called once: it becomes a plain function (without ``self``
    when it is unused).
    Never changes: the method's body or the arguments of its one call; a method referenced any
    other way stays."""
    run_targets(gate, method_targets, _method_alternatives)


# ---- a comprehension over one element ----------------------------------------------------------
def _comprehensions(module: cst.Module) -> list[cst.CSTNode]:
    return collect(module, lambda n: isinstance(n, (cst.ListComp, cst.SetComp, cst.GeneratorExp))
                   and n.for_in.inner_for_in is None and not n.for_in.ifs and n.for_in.asynchronous is None
                   and isinstance(n.for_in.target, cst.Name) and one_step(n.for_in.iter) is None)


def _comprehension_alternatives(module: cst.Module, comp: cst.CSTNode) -> Iterable[str | None]:
    for_in = comp.for_in    # type: ignore[attr-defined]
    name = for_in.target.value
    if name in names_bound_inside(comp.elt):      # type: ignore[attr-defined]
        return
    elt = substitute(comp.elt, {name: first_element(for_in.iter)})   # type: ignore[attr-defined]
    new = cst.Set([cst.Element(elt)]) if isinstance(comp, cst.SetComp) else cst.List([cst.Element(elt)])
    yield safe(lambda: replace(module, comp, new))


def comprehension_to_element(gate: Gate) -> None:
    """A comprehension (a helper's ``return [Req(i) for i in range(n)]``) over what was one
    element in the failing run: the one-element list of that element (``[Req(0)]``; over a name,
    ``[f(xs[0])]``). Literal one-element iterables are single_element's. Never one with a
    condition or two ``for``s, never one whose element binds the loop name again.

    Removes: a comprehension over what is one element in the failing run: it becomes the
    one-element list of that element.
    Never changes: the expression computed for the element."""
    run_targets(gate, _comprehensions, _comprehension_alternatives)
