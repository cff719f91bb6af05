"""Constant propagation: make values literal so the code that only carried them becomes dead.

- ``propagate_constants``: inline a name bound once to a literal (``N = 512`` … ``f(N)`` →
  ``f(512)``); replace ``REGISTRY[key]`` / ``REGISTRY.get(key)`` on a dict display bound once with
  the entry's value.
- ``recorded_values``: replace an argument expression (a helper call, a merged dict, a config
  attribute) by the literal value it had in the traced run of the original (see reducer.analysis.trace).
Each candidate also drops whatever became dead (definitions, pure assignments), so that a value
that is longer to write than the expression it replaces still wins when it frees a helper.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable

import libcst as cst

from reducer.analysis.cst import collect, is_literal, parse, render, replace, replace_many, root_name, safe
from reducer.analysis.names import BINDINGS, Role, Roles, census
from reducer.analysis.size import size_of
from reducer.passes.base import Gate
from reducer.passes.loops import run_targets, together_then_each
from reducer.passes.rewrites import drop_dead_code, single_bindings, spread_kwargs
from reducer.passes.slicing import sliced


class _Inline(cst.CSTTransformer):
    """Every load of ``name`` becomes ``value``; its defining statement goes. ``definition`` is
    the name's one binding, so any other occurrence that is no load is no variable either (an
    attribute, keyword or import name) and stays."""

    def __init__(self, name: str, value: cst.BaseExpression, definition: cst.CSTNode) -> None:
        self.name, self.value, self.definition = name, value, definition
        self.roles = Roles()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is self.definition:
            return False
        self.roles.decide(node)
        return not isinstance(node, (cst.Import, cst.ImportFrom))     # an import has no loads

    def on_leave(self, original: cst.CSTNode, updated):
        if original is self.definition:
            return cst.RemoveFromParent()
        if isinstance(original, cst.Name) and original.value == self.name and self.roles.of(original) is Role.READ:
            return self.value
        return updated


def inline_name(module: cst.Module, name: str, line: cst.CSTNode, value: cst.BaseExpression) -> str:
    return render(module.visit(_Inline(name, value, line)))


def _key_of(expr: cst.BaseExpression) -> object:
    try:
        return ("lit", ast.literal_eval(parse("").code_for_node(expr)))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _lookup(table: cst.Dict, key: cst.BaseExpression) -> cst.BaseExpression | None:
    want = _key_of(key)
    if want is None:
        return None
    for e in table.elements:
        if isinstance(e, cst.DictElement) and _key_of(e.key) == want:
            return e.value
    return None


def _lookups(module: cst.Module) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(expression, value) for each ``D[key]`` / ``D.get(key[, default])`` resolvable statically."""
    tables = {k: v for k, (_, v) in single_bindings(
        module, lambda e: isinstance(e, cst.Dict)
        and all(isinstance(x, cst.DictElement) and is_literal(x.key) for x in e.elements)).items()}
    out = []
    for node in collect(module, lambda n: isinstance(n, (cst.Subscript, cst.Call))):
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            table = tables.get(node.value.value) if isinstance(node.value, cst.Name) else node.value
            if not isinstance(table, cst.Dict):
                continue
            value = _lookup(table, node.slice[0].slice.value)
        elif (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get"
              and node.args and node.args[0].keyword is None and not node.args[0].star):
            owner = node.func.value
            table = tables.get(owner.value) if isinstance(owner, cst.Name) else owner
            if not isinstance(table, cst.Dict):
                continue
            value = _lookup(table, node.args[0].value)
        else:
            continue
        if value is not None:
            out.append((node, value))
    return out


def _targets(module: cst.Module) -> list[cst.CSTNode]:
    defs = [line for line, _ in single_bindings(module).values()]
    return sorted(defs + [n for n, _ in _lookups(module)], key=_preorder_index(module))


def _preorder_index(module: cst.Module):
    order = {id(n): i for i, n in enumerate(collect(module, lambda n: True))}
    return lambda n: order[id(n)]


def _alternatives(module: cst.Module, node: cst.CSTNode) -> Iterable[str | None]:
    if isinstance(node, cst.SimpleStatementLine):
        s = node.body[0]
        name = s.targets[0].target.value if isinstance(s, cst.Assign) else s.target.value
        yield safe(lambda: drop_dead_code(inline_name(module, name, node, s.value)))
        return
    for expr, value in _lookups(module):
        if expr is node:
            yield safe(lambda: drop_dead_code(replace(module, node, value)))


def propagate_constants(gate: Gate) -> None:
    """Inline constants and registry lookups one at a time.

    Removes: a name bound once to a literal (inlined where it is read), and ``REGISTRY[key]`` /
    ``REGISTRY.get(key)`` on a dict bound once (replaced by the entry); what carried them goes.
    Never changes: a name bound more than once, or a table changed in place."""
    run_targets(gate, _targets, _alternatives)


# ---- values recorded in the traced run --------------------------------------------------------
def _recorded_targets(gate: Gate):
    sites = gate.trace.literal_sites() if gate.trace is not None else {}

    def site_key(module: cst.Module, call: cst.Call, arg: cst.Arg) -> tuple[str, str]:
        prefix = "**" if arg.star == "**" else ""
        return module.code_for_node(call.func), prefix + module.code_for_node(arg.value)

    def find(module: cst.Module) -> list[cst.CSTNode]:
        out = []
        for call in collect(module, lambda n: isinstance(n, cst.Call)):
            for arg in call.args:
                if arg.star != "*" and not is_literal(arg.value) and site_key(module, call, arg) in sites:
                    out.append(arg.value)
        return out

    def value_for(module: cst.Module, node: cst.CSTNode) -> tuple[cst.CSTNode, cst.CSTNode] | None:
        """(node to replace, its replacement): the argument's value, or for ``**expr`` the
        whole call with the recorded entries spelled as keywords."""
        for call in collect(module, lambda n: isinstance(n, cst.Call) and any(a.value is node for a in n.args)):
            arg = next(a for a in call.args if a.value is node)
            text = sites.get(site_key(module, call, arg))
            if text is None:
                return None
            value = cst.parse_expression(text)
            if arg.star != "**":
                return node, value
            return call, spread_kwargs(call, arg, value)
        return None

    def alternatives(module: cst.Module, node: cst.CSTNode) -> Iterable[str | None]:
        pair = value_for(module, node)
        if pair is None:
            return
        plain = safe(lambda: replace(module, *pair))
        if plain is None:
            return
        # the value that reached the call makes whatever built it up (``entries[k] = ...`` in a
        # loop) irrelevant to the failure: the slice drops it where dead-code removal cannot,
        # since the variable is still read
        lines = gate.failure_lines(gate.best)
        if lines and plain.count("\n") == module.code.count("\n"):
            cut = safe(lambda: sliced(plain, set(lines)))
            if cut is not None:
                yield safe(lambda: drop_dead_code(cut))
        yield safe(lambda: drop_dead_code(plain))

    def everything(module: cst.Module) -> str | None:
        # only the substitutions that shrink the script on their own (a long literal for a
        # short name that frees nothing would make the combined candidate lose on size)
        best = size_of(module.code)
        pairs = []
        for n in find(module):
            pair = value_for(module, n)
            alone = safe(lambda: drop_dead_code(replace(module, *pair))) if pair is not None else None
            if alone is not None and size_of(alone) < best and all(p[0] is not pair[0] for p in pairs):
                pairs.append(pair)
        return safe(lambda: drop_dead_code(replace_many(module, pairs))) if len(pairs) > 1 else None

    return find, alternatives, everything


def recorded_values(gate: Gate) -> None:
    """All recorded values at once first (one run, usually enough), then one by one.

    Removes: the expressions (helper calls, merged dicts, config attributes) that computed an
    argument, replaced by the literal the traced run saw; what then only carried them goes as dead
    code.
    Never changes: a value that varied between calls of the site, a value with no source form, or a
    call site the trace did not record."""
    if gate.trace is not None:
        together_then_each(gate, *_recorded_targets(gate))


# ---- calls through registries, resolved by the traced run -------------------------------------
def _undecorated(module: cst.Module, name: str) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    return [(d, d.with_changes(decorators=[])) for d in module.body
            if isinstance(d, (cst.FunctionDef, cst.ClassDef)) and d.name.value == name and d.decorators]


def _failing_defs(gate: Gate, module: cst.Module) -> set[str]:
    """Top-level functions and classes of the best that the failure ran through."""
    lines = set(gate.failure_lines(gate.best) or ())
    if not lines:
        return set()
    try:
        tree = ast.parse(gate.best)
    except SyntaxError:
        return set()
    return {d.name for d in tree.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and any(d.lineno <= n <= (d.end_lineno or d.lineno) for n in lines)}


def _dispatch_calls(gate: Gate, module: cst.Module) -> list[tuple[cst.Call, list[str]]]:
    """Each call through a registry, with the script's functions it reached in the traced run:
    the ones the failure ran through first (the handler of the failing job), at most three."""
    sites = gate.trace.dispatch_choices() if gate.trace is not None else {}
    defined = {d.name.value for d in module.body if isinstance(d, (cst.FunctionDef, cst.ClassDef))}
    failing = _failing_defs(gate, module) if any(len(v) > 1 for v in sites.values()) else set()
    out = []
    for c in collect(module, lambda n: isinstance(n, cst.Call)):
        targets = [t for t in sites.get(module.code_for_node(c.func), ()) if t in defined]
        if targets:
            out.append((c, sorted(targets, key=lambda t: t not in failing)[:3]))
    return out


def resolve_dispatch(gate: Gate) -> None:
    """``COMMANDS[args.command](args)`` → ``cmd_report(args)``: the registry, the dispatch
    variable and the registering decorator stop carrying anything and can go. Each site is
    offered with the target's decorators dropped (a ``@register`` that returns None), then
    with them kept; all sites at once first. A site that reached several functions (a worker's
    ``fn(job)``) offers the one the failure went through first.

    Removes: a dispatch through a registry or table (``COMMANDS[args.command](args)``): the call
    names the one entry the traced run took.
    Never changes: the function the traced run called at the site, or its arguments (only the
    lookup that chose it, and the registering decorators, go)."""
    if gate.trace is None or not gate.trace.dispatch_choices():
        return
    module = parse(gate.best)
    sites = _dispatch_calls(gate, module)
    if len(sites) > 1 or (sites and len(sites[0][1]) > 1):
        pairs = [(c, c.with_changes(func=cst.Name(ts[0]))) for c, ts in sites]
        undecorated = [p for t in {ts[0] for _, ts in sites} for p in _undecorated(module, t)]
        together = safe(lambda: drop_dead_code(replace_many(module, pairs + undecorated)))
        if together is not None and gate.consider(together):
            return

    def find(m: cst.Module) -> list[cst.CSTNode]:
        return [c for c, _ in _dispatch_calls(gate, m)]

    def alternatives(m: cst.Module, call: cst.CSTNode) -> Iterable[str | None]:
        targets = dict((id(c), ts) for c, ts in _dispatch_calls(gate, m)).get(id(call), [])
        for target in targets:
            pair = (call, call.with_changes(func=cst.Name(target)))
            yield safe(lambda: drop_dead_code(replace_many(m, [pair, *_undecorated(m, target)])))
            yield safe(lambda: drop_dead_code(replace_many(m, [pair])))

    run_targets(gate, find, alternatives)


# ---- every constant at once ---------------------------------------------------------------------
_READ_ONLY_METHODS = {"get", "keys", "values", "items", "copy", "index", "count"}


def _mutated(module: cst.Module) -> set[str]:
    """Names whose object is changed in place somewhere (`d[k] = v`, `d.update()`, `l.append()`)."""
    out: set[str] = set()

    for t in collect(module, lambda n: isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.Del))):
        target = t.target
        if isinstance(target, (cst.Subscript, cst.Attribute)):
            out.add(root_name(target) or "")
    for c in collect(module, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)):
        if c.func.attr.value not in _READ_ONLY_METHODS and isinstance(c.func.value, cst.Name):
            out.add(c.func.value.value)
    return out


def _immutable(e: cst.BaseExpression) -> bool:
    return is_literal(e) and not collect(e, lambda n: isinstance(n, (cst.List, cst.Dict, cst.Set)))


def _folds(module: cst.Module) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    mutated = _mutated(module)
    names = census(module)      # one walk answers all four questions about bindings below
    displays = {k: v for k, (_, v) in single_bindings(
        module, lambda e: isinstance(e, (cst.Dict, cst.List, cst.Tuple)), names=names).items() if k not in mutated}
    # a parameter of the same name is another variable: its loads are skipped below
    scalars = {k: v for k, (_, v) in single_bindings(module, _immutable, ignore_params=True, names=names).items()}
    # `checkpoint = base_dir`, both bound once: one name for one object
    once = {k for k, n in names.total(BINDINGS).items() if n == 1}
    scalars.update({k: v for k, (_, v) in single_bindings(
        module, lambda e: isinstance(e, cst.Name) and e.value in once, names=names).items()})
    shadowing: list[set[str]] = []

    def resolve(e: cst.CSTNode) -> cst.CSTNode | None:
        if isinstance(e, (cst.Dict, cst.List, cst.Tuple)):
            return e
        if isinstance(e, cst.Name):
            return displays.get(e.value)
        if (isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value in ("list", "tuple", "dict")
                and len(e.args) == 1 and not e.args[0].star and e.args[0].keyword is None):
            return resolve(e.args[0].value)
        return None

    def element(table: cst.CSTNode, key: cst.BaseExpression) -> cst.BaseExpression | None:
        if isinstance(table, cst.Dict):
            return _lookup(table, key)
        want = _key_of(key)
        if want is None or not isinstance(want[1], int) or isinstance(want[1], bool):
            return None
        items = [e for e in table.elements if isinstance(e, cst.Element)]
        if len(items) != len(table.elements) or not -len(items) <= want[1] < len(items):
            return None
        return items[want[1]].value

    out: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    roles = Roles()

    class _FindFolds(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, (cst.FunctionDef, cst.Lambda)):
                p = node.params
                shadowing.append({x.name.value for x in [*p.posonly_params, *p.params, *p.kwonly_params]}
                                 | {x.name.value for x in (p.star_arg, p.star_kwarg) if isinstance(x, cst.Param)})
            if isinstance(node, (cst.AssignTarget, cst.Param, cst.ImportFrom, cst.Import)):
                return False
            roles.decide(node)
            new = None
            # loads only: the target of `N: int = 5`, N's one binding, is no place for 5
            if (isinstance(node, cst.Name) and roles.of(node) is Role.READ and node.value in scalars
                    and not any(node.value in names for names in shadowing)):
                new = scalars[node.value]
            elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                table = resolve(node.value)
                new = element(table, node.slice[0].slice.value) if table is not None else None
            elif (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get"
                  and len(node.args) in (1, 2) and not node.args[0].star and node.args[0].keyword is None):
                table = resolve(node.func.value)
                new = _lookup(table, node.args[0].value) if isinstance(table, cst.Dict) else None
            elif isinstance(node, cst.Call) and node.func is not None and resolve(node) is not None \
                    and not isinstance(node.args[0].value, cst.Name):
                new = resolve(node)     # `list([...])` → `[...]`
            if new is not None:
                out.append((node, new))
                return False            # outermost first; what is inside goes next time
            return True

        def on_leave(self, node: cst.CSTNode) -> None:
            if isinstance(node, (cst.FunctionDef, cst.Lambda)):
                shadowing.pop()

    module.visit(_FindFolds())
    return out


def folded(source: str) -> str | None:
    """Constants folded to a fixpoint in one candidate: names bound once to an immutable literal
    inlined, lookups in literal tables (``REGISTRY[key]``, ``CONFIGS.get(key)``, ``requests[0]``)
    replaced by the entry, then whatever carried them dropped. Tables changed in place anywhere
    are left alone."""
    changed = False
    for _ in range(30):
        module = parse(source)
        pairs = _folds(module)
        if not pairs:
            break
        source = replace_many(module, pairs)
        changed = True
    return drop_dead_code(source) if changed else None


def fold_constants(gate: Gate) -> None:
    """Offer the script with its constants folded (reducer/passes/constants.py ``folded``).

    Removes: names bound once to an immutable literal and lookups in literal tables, folded to a
    fixpoint in one candidate; what carried them goes.
    Never changes: a table changed in place anywhere, or a name bound more than once."""
    candidate = safe(lambda: folded(gate.best))
    if candidate is not None and candidate != gate.best:
        gate.consider(candidate)
