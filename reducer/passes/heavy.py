"""The heavier level: rewrites too bold for every round, tried when the usual fixpoint came early
(well before --max-time, or before the default budget when there is none) — see
``reducer.search.loop.SearchLoop._search``. One candidate does all of them, repeatedly, with the dead
code they leave removed:

- every method reached once made a plain function (``scaffolding.as_function``), then every
  function called once inlined, the ``__main__`` guard unwrapped (``inline.flattened``);
- every loop that ran once in the traced run (a binding record seen once) unrolled into its
  target's first element and its body;
- every instance of a simple class (a dataclass, or an ``__init__`` that only stores its
  parameters) that is bound once and only read as ``obj.field`` replaced by the values its
  fields were built from.

If that one candidate fails differently, each kind is offered on its own (all its sites at once).
An accepted one sends the search back to the structural phase; a level that gains nothing ends
the search. What it must never change: the values reaching the failing call (a field read
becomes the very expression the constructor stored, a loop target its first element).
"""
from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from reducer.analysis.cst import collect, parse, parse_with_positions, parses, replace_many, safe
from reducer.passes.base import Gate
from reducer.passes.rewrites import drop_dead_code, first_element, substitute
from reducer.passes.scaffolding import as_function, method_targets

Rewrite = Callable[[str], "str | None"]


# ---- methods, then the call chain --------------------------------------------------------------
def methods_flattened(source: str) -> str | None:
    from reducer.passes.inline import flattened
    changed = False
    for _ in range(50):
        module = parse(source)
        step = None
        for fn in method_targets(module):
            step = safe(lambda fn=fn: as_function(module, fn, keep_self=False)) or \
                safe(lambda fn=fn: as_function(module, fn, keep_self=True))
            if step is not None and parses(step):
                break
            step = None
        if step is None:
            break
        source, changed = step, True
    flat = safe(lambda: flattened(source))
    if flat is not None:
        source, changed = flat, True
    return source if changed else None


# ---- loops that ran once -------------------------------------------------------------------------
def unrolled(source: str, trace) -> str | None:
    """Every ``for`` whose header bound its names exactly once in the traced run (of this very
    source) as ``target = <first element>`` followed by its body."""
    if trace is None or getattr(trace, "source", None) != source:
        return None
    once = {b.line for b in trace.binds if b.seen == 1}
    if not once:
        return None
    module, pos = parse_with_positions(source)
    pairs = []
    for loop in collect(module, lambda n: isinstance(n, cst.For)):
        if loop.orelse is not None or loop.asynchronous is not None or pos[loop].start.line not in once:
            continue
        if collect(loop.body, lambda n: isinstance(n, (cst.Break, cst.Continue, cst.For, cst.While,
                                                        cst.FunctionDef, cst.ClassDef))):
            continue
        if any(loop in [p for p, _ in pairs] or collect(p, lambda n, l=loop: n is l) for p, _ in pairs):
            continue
        first = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(loop.target)], first_element(loop.iter))])
        body = list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else [cst.SimpleStatementLine(list(loop.body.body))]
        pairs.append((loop, cst.FlattenSentinel([first.with_changes(leading_lines=loop.leading_lines), *body])))
    return safe(lambda: replace_many(module, pairs)) if pairs else None


# ---- instances of simple classes ----------------------------------------------------------------
def simple_fields(cls: cst.ClassDef) -> tuple[list[tuple[str, cst.BaseExpression | None]], dict[str, cst.BaseExpression]] | None:
    """(the constructor's parameters with their defaults, field -> the expression stored in it,
    reading the parameters) for a dataclass or a class whose ``__init__`` only stores."""
    if not isinstance(cls.body, cst.IndentedBlock):
        return None
    is_dc = any((isinstance(d.decorator, cst.Name) and d.decorator.value == "dataclass")
                or (isinstance(d.decorator, cst.Call) and isinstance(d.decorator.func, cst.Name)
                    and d.decorator.func.value == "dataclass" and not d.decorator.args) for d in cls.decorators)
    if cls.bases and not is_dc:
        return None
    params: list[tuple[str, cst.BaseExpression | None]] = []
    fields: dict[str, cst.BaseExpression] = {}
    init = None
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
            init = stmt
        elif is_dc and isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name):
                    if s.value is not None and isinstance(s.value, cst.Call):
                        return None         # field(default_factory=...)
                    params.append((s.target.value, s.value))
                    fields[s.target.value] = cst.Name(s.target.value)
    if is_dc:
        return (params, fields) if init is None and params else None
    if init is None or init.decorators or not isinstance(init.params.star_arg, cst.MaybeSentinel) \
            or init.params.star_kwarg is not None or init.params.kwonly_params or init.params.posonly_params:
        return None
    ps = init.params.params[1:]
    params = [(p.name.value, p.default) for p in ps]
    if not isinstance(init.body, cst.IndentedBlock):
        return None
    for line in init.body.body:
        if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(line.body[0], cst.Assign)):
            return None
        a = line.body[0]
        t = a.targets[0].target
        if len(a.targets) != 1 or not (isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name)
                                       and t.value.value == init.params.params[0].name.value):
            return None
        fields[t.attr.value] = a.value
    return params, fields


def _bind(params, call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    if any(a.star for a in call.args):
        return None
    out: dict[str, cst.BaseExpression] = {}
    names = [n for n, _ in params]
    pos = [a.value for a in call.args if a.keyword is None]
    if len(pos) > len(names):
        return None
    out.update(zip(names, pos))
    for a in call.args:
        if a.keyword is not None:
            if a.keyword.value not in names:
                return None
            out[a.keyword.value] = a.value
    for n, default in params:
        if n not in out:
            if default is None:
                return None
            out[n] = default
    return out


def instances_replaced(source: str) -> str | None:
    module = parse(source)
    classes = {c.name.value: c for c in module.body if isinstance(c, cst.ClassDef)}
    pairs = []
    for line in collect(module, lambda n: isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1
                        and isinstance(n.body[0], cst.Assign) and len(n.body[0].targets) == 1
                        and isinstance(n.body[0].targets[0].target, cst.Name)
                        and isinstance(n.body[0].value, cst.Call) and isinstance(n.body[0].value.func, cst.Name)
                        and n.body[0].value.func.value in classes):
        a = line.body[0]
        var, call = a.targets[0].target.value, a.value
        shape = simple_fields(classes[call.func.value])
        if shape is None:
            continue
        bound = _bind(shape[0], call)
        if bound is None:
            continue
        names = collect(module, lambda n: isinstance(n, cst.Name) and n.value == var)
        reads = collect(module, lambda n: isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name)
                        and n.value.value == var)
        # the binding's own name, plus one per field read; nothing else may mention it
        if len(names) != 1 + len(reads) or not reads:
            continue
        stores = collect(module, lambda n: isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Attribute)
                         and isinstance(n.target.value, cst.Name) and n.target.value.value == var)
        if stores or any(r.attr.value not in shape[1] for r in reads):
            continue
        for r in reads:
            value = substitute(shape[1][r.attr.value], bound)
            if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not value.lpar:
                value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            pairs.append((r, value))
        pairs.append((line, cst.RemoveFromParent()))
        break       # one instance per rewrite: the next is found in the new tree
    return safe(lambda: replace_many(module, pairs)) if pairs else None


def all_instances_replaced(source: str) -> str | None:
    changed = False
    for _ in range(50):
        new = safe(lambda: instances_replaced(source))
        if new is None or not parses(new):
            break
        source, changed = new, True
    return source if changed else None


# ---- the level --------------------------------------------------------------------------------
def _tidy(source: str) -> str:
    out = safe(lambda: drop_dead_code(source))
    return out if out is not None and parses(out) else source


def heavy_candidates(source: str, trace) -> list[str]:
    kinds: list[Rewrite] = [methods_flattened, lambda s: unrolled(s, trace), all_instances_replaced]
    together, changed = source, False
    for _ in range(5):
        before = together
        for kind in kinds:
            new = safe(lambda kind=kind: kind(together))
            if new is not None and parses(new):
                together, changed = new, True
        if together == before:
            break
    out = [_tidy(together)] if changed else []
    for kind in kinds:
        new = safe(lambda kind=kind: kind(source))
        if new is not None and parses(new):
            out.append(_tidy(new))
    return [c for i, c in enumerate(out) if c != source and c not in out[:i]]


def heavy_level(gate: Gate) -> None:
    """All the heavy rewrites as one candidate, then each kind on its own (see the module's
    docstring). Never part of the usual rounds: ``Reducer`` runs it only when the fixpoint came
    early.

    Removes: in one candidate: every method reached once made a function and every function called
    once inlined, loops that ran once unrolled, instances of simple classes replaced by their field
    values; the dead code they leave.
    Never changes: anything the usual passes already decide: it runs only after an early fixpoint,
    and what it gains goes through the phases again."""
    found = heavy_candidates(gate.best, gate.trace)
    if found:
        gate.first([(i, c) for i, c in enumerate(found)])
