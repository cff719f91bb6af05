"""Inline the script's own functions and methods that are called exactly once: the call becomes
the arguments bound as assignments plus the body, and the definition goes (it is dead now)."""
from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import libcst as cst

from reducer.analysis.cst import assign, collect_statements, parse, replace_many, safe, splice
from reducer.analysis.names import BINDINGS, USES, census, uses
from reducer.passes.base import Gate
from reducer.passes.loops import run_targets
from reducer.passes.rewrites import is_pure, parameter_slots


def _own_nodes(fn: cst.FunctionDef, *kinds: type) -> dict[type, list[cst.CSTNode]]:
    """Nodes of each of ``kinds`` in fn's body, not counting nested functions/classes: one walk."""
    found: dict[type, list[cst.CSTNode]] = {k: [] for k in kinds}

    class OwnNodes(cst.CSTVisitor):
        def visit_FunctionDef(self, node):
            return node is fn

        def visit_ClassDef(self, node):
            return False

        def on_visit(self, node):
            for kind in kinds:
                if isinstance(node, kind):
                    found[kind].append(node)
            return super().on_visit(node)

    fn.visit(OwnNodes())
    return found


def _global_lines(fn: cst.FunctionDef) -> list[cst.SimpleStatementLine]:
    """The lines of ``fn``'s own body that only declare names global (``global _model, _tok``)."""
    return [line for line in fn.body.body if isinstance(line, cst.SimpleStatementLine)
            and all(isinstance(s, cst.Global) for s in line.body)]


def _inlinable(fn: cst.FunctionDef, module_level: bool = False) -> bool:
    """``module_level``: the one call is a statement of the module itself, where a ``global``
    line of the body's own top level says nothing (its names are the module's there) and goes."""
    if fn.decorators or fn.asynchronous is not None or fn.name.value.startswith("__"):
        return False
    p = fn.params
    if not isinstance(p.star_arg, cst.MaybeSentinel) and p.star_arg is not None or p.star_kwarg is not None:
        return False
    if not isinstance(fn.body, cst.IndentedBlock):
        return False
    own = _own_nodes(fn, cst.Yield, cst.Global, cst.Nonlocal, cst.Return)
    if own[cst.Yield] or own[cst.Nonlocal]:
        return False
    if own[cst.Global]:
        lines = _global_lines(fn)
        # every `global` of the body on a line of its own top level, and something else besides
        if not (module_level and len(own[cst.Global]) == sum(len(line.body) for line in lines)
                and len(lines) < len(fn.body.body)):
            return False
    returns = own[cst.Return]
    if not returns:
        return True
    last = fn.body.body[-1]
    return (len(returns) == 1 and isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1
            and last.body[0] is returns[0])


def _nested_call(expr: cst.BaseExpression, name: str) -> cst.Call | None:
    """The call of ``name`` that ``expr`` evaluates first and unconditionally: the expression
    itself or an argument of a call in it (``sys.exit(main())``, ``results.put(handle(r))``)."""
    if isinstance(expr, (cst.Subscript, cst.Attribute)):
        # `load_requests()[0]`, `build().config`: the call is evaluated first
        return _nested_call(expr.value, name)
    if not isinstance(expr, cst.Call):
        return None
    f = expr.func
    if (isinstance(f, cst.Name) and f.value == name) or (isinstance(f, cst.Attribute) and f.attr.value == name):
        return expr
    for arg in expr.args:
        found = _nested_call(arg.value, name)
        if found is not None:
            return found
    return None


def _first_calls(expr: cst.BaseExpression) -> Iterable[tuple[str, cst.Call]]:
    """(callee name, call) for every call ``_nested_call`` could return from ``expr``, in its order."""
    if isinstance(expr, (cst.Subscript, cst.Attribute)):
        yield from _first_calls(expr.value)
        return
    if not isinstance(expr, cst.Call):
        return
    f = expr.func
    if isinstance(f, cst.Name):
        yield f.value, expr
    elif isinstance(f, cst.Attribute):
        yield f.attr.value, expr
    for arg in expr.args:
        yield from _first_calls(arg.value)


@functools.lru_cache(maxsize=8)
def _call_sites(module: cst.Module) -> dict[str, tuple[cst.SimpleStatementLine, cst.BaseSmallStatement, cst.Call]]:
    """For each callee name, the first one-statement line calling it (and the statement and the
    call): one walk of the module, so finding every function's call site stays linear."""
    sites: dict[str, tuple[cst.SimpleStatementLine, cst.BaseSmallStatement, cst.Call]] = {}
    for line in collect_statements(module, lambda n: isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1):
        s = line.body[0]
        if isinstance(s, (cst.Expr, cst.Assign, cst.Return)):
            expr = s.value
        elif isinstance(s, cst.Raise):
            expr = s.exc
        else:
            continue
        if expr is None:
            continue
        for name, call in _first_calls(expr):
            sites.setdefault(name, (line, s, call))
    return sites


def _call_site(module: cst.Module, fn: cst.FunctionDef):
    """The one statement calling ``fn`` and the call in it, when inlining there is possible."""
    return _call_sites(module).get(fn.name.value)


def targets(module: cst.Module) -> list[cst.FunctionDef]:
    used = uses(module)
    out = []
    sites = _call_sites(module)
    for fn in collect_statements(module, lambda n: isinstance(n, cst.FunctionDef)):
        name = fn.name.value
        if name not in sites or used.get(name, 0) < 1:
            continue  # never called where it could be inlined: no walk of its body needed
        # a local of the same name (`main = 0 if cuda else "cpu"` inside main) is not a call
        body = census(fn.body)
        inside = body.total(USES).get(name, 0) if body.total(BINDINGS).get(name, 0) > 0 else 0
        if used.get(name, 0) - inside == 1:
            site = _call_site(module, fn)
            # never inline a function into itself
            if site is not None and not collect_statements(fn, lambda n, line=site[0]: n is line) \
                    and _inlinable(fn, module_level=any(line is site[0] for line in module.body)):
                out.append(fn)
    return out


def inline_call(module: cst.Module, fn: cst.FunctionDef) -> str | None:
    pairs = _inline_pairs(module, fn)
    return None if pairs is None else replace_many(module, pairs)


def _inline_pairs(module: cst.Module, fn: cst.FunctionDef) -> list[tuple[cst.CSTNode, Any]] | None:
    """The replacements that inline ``fn`` at its one call site: the site's line becomes the
    bound arguments plus the body, and the definition goes."""
    site = _call_site(module, fn)
    if site is None:
        return None
    line, stmt, call = site
    if any(a.star for a in call.args):
        return None
    params = fn.params
    positional = list(params.posonly_params) + list(params.params)
    binds: list[cst.BaseStatement] = []
    bound: set[str] = set()
    if isinstance(call.func, cst.Attribute) and positional and positional[0].name.value in ("self", "cls"):
        receiver = parse("").code_for_node(call.func.value)
        if receiver != positional[0].name.value:
            binds.append(assign(positional[0].name.value, call.func.value))
        bound.add(positional[0].name.value)
    slots = parameter_slots(call, fn)
    if len(slots) != len(call.args):
        return None     # an argument that binds to nothing: the call would have raised TypeError
    for arg, param in slots:
        bound.add(param.name.value)
        if not (isinstance(arg.value, cst.Name) and arg.value.value == param.name.value):
            binds.append(assign(param.name.value, arg.value))
    for param in positional + list(params.kwonly_params):
        if param.name.value in bound:
            continue
        if param.default is None:
            return None
        binds.append(assign(param.name.value, param.default))
    globals_ = _global_lines(fn)
    body = [line for line in fn.body.body if not any(line is g for g in globals_)]
    result: cst.BaseExpression | None = None
    last = body[-1]
    if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return):
        result = last.body[0].value
        body = body[:-1]
    if call is not getattr(stmt, "value", None):
        # nested in an outer call or a raise: the body runs first, its result takes the call's place
        outer = replace_many(cst.Module([line]), [(call, result or cst.Name("None"))])
        tail = list(cst.parse_module(outer).body)
    elif isinstance(stmt, cst.Assign):
        same = (len(stmt.targets) == 1 and isinstance(result, cst.Name) and isinstance(stmt.targets[0].target, cst.Name)
                and stmt.targets[0].target.value == result.value)
        # `device_map = build()` whose body ends `return device_map`: nothing left to assign
        tail = [] if same else [cst.SimpleStatementLine([stmt.with_changes(value=result or cst.Name("None"))])]
    elif isinstance(stmt, cst.Return):
        tail = [cst.SimpleStatementLine([cst.Return(value=result)])]
    else:
        # `main()` whose `return 0` ends the body: the value is dropped, a call is kept
        tail = [cst.SimpleStatementLine([cst.Expr(result)])] if result is not None and not is_pure(result) else []
    new = splice(binds + body + tail, line)
    return [(line, new), (fn, cst.RemoveFromParent())]


def _alternatives(module: cst.Module, fn: cst.CSTNode) -> Iterable[str | None]:
    yield safe(lambda: inline_call(module, fn))


def inline_functions(gate: Gate) -> None:
    """Inline each function called once, one at a time.

    Removes: a function or method called exactly once: the call becomes its arguments bound as
    assignments plus its body, and the definition goes.
    Never changes: a function called more than once or used other than by a call, nor one that
    cannot be spliced: decorated, async, a dunder, with ``*args``/``**kwargs``, a generator, one
    with ``nonlocal``, or ``global`` unless it is called from the module's own top level (its
    ``global`` lines then go), or a ``return`` anywhere but its last line."""
    run_targets(gate, targets, _alternatives)


# ---- the whole call chain at once ------------------------------------------------------------
def flattened(source: str) -> str | None:
    """Every function called once inlined into its caller, repeatedly (``main`` into the module,
    the loader into ``main``, ...), the ``__main__`` guard unwrapped: the failing path as one
    straight script, offered as ONE candidate. Inlining one function at a time costs a run each.

    Each round inlines a batch of independent functions in one rewrite (one parse, one walk),
    so a script of a thousand helpers takes as many rounds as its call chain is deep."""
    from reducer.analysis.cst import parses
    from reducer.passes.unwrap import unwrap_main_guard
    changed = False
    for _ in range(100):
        module = parse(source)
        new = _inline_batch(module, targets(module))
        if new is None:
            break
        source, changed = new, True
    guardless = safe(lambda: unwrap_main_guard(source))
    if guardless is not None and guardless != source and parses(guardless):
        source, changed = guardless, True
    return source if changed else None


def _inline_batch(module: cst.Module, fns: list[cst.FunctionDef]) -> str | None:
    """Inline the functions of ``fns`` whose call sites are not inside another inlined function
    (and share no line with one), all in one rewrite; one at a time if the batch does not parse."""
    from reducer.analysis.cst import parses
    chosen: list[tuple[cst.FunctionDef, list[tuple[cst.CSTNode, Any]]]] = []
    removed: set[int] = set()           # statement lines inside a chosen function
    sites: set[int] = set()             # the chosen call-site lines
    for fn in fns:
        pairs = safe(lambda fn=fn: _inline_pairs(module, fn))
        if not pairs:
            continue
        site_line = id(pairs[0][0])
        inner = {id(n) for n in collect_statements(fn, lambda n: isinstance(n, cst.SimpleStatementLine))}
        if site_line in removed or site_line in sites or inner & sites:
            continue
        chosen.append((fn, pairs))
        removed |= inner
        sites.add(site_line)
    if not chosen:
        return None
    new = safe(lambda: replace_many(module, [p for _, ps in chosen for p in ps]))
    if new is not None and parses(new):
        return new
    for fn, pairs in chosen:
        one = safe(lambda pairs=pairs: replace_many(module, pairs))
        if one is not None and parses(one):
            return one
    return None


def flatten(gate: Gate) -> None:
    """Offer the script with every function called once inlined and the ``__main__`` guard unwrapped.

    Removes: every function called once (inlined into its caller, repeatedly) and the ``__main__``
    guard, as ONE candidate: the failing path as one straight script.
    Never changes: the order of the statements that run, or a function called more than once or
    used other than by a call."""
    candidate = safe(lambda: flattened(gate.best))
    if candidate is not None:
        gate.consider(candidate)
