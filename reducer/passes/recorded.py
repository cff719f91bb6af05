"""Put back what the traced run saw: a variable bound to one value becomes that value, and a
loop that ran once becomes its body.

    raw = job.payload                 ->  raw = '{"id": 2, "text": "bad" "lang": "en"}'
    values = [s.ms for s in rows]     ->  values = []
    for i, x in enumerate(shard(a)):  ->  i = 0
        probe(i, x)                       x = ['10.0.30']
                                          probe(i, x)

The values come from a traced run of the current best (``TraceData.binding_sites``), so what
the helpers, the objects and the loop computed is replaced by what reached the failure; the
scaffolding that computed it is left with no reader and goes with the dead code. Only values
with a source form are used (literals, containers of them, the script's enum members), and
only where every run of the statement bound the same value.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

import libcst as cst

from reducer.analysis.cst import assign, body_statements, collect, is_literal, replace_many, safe, splice
from reducer.analysis.size import size_of
from reducer.passes.base import Gate
from reducer.passes.loops import together_then_each
from reducer.passes.rewrites import drop_dead_code, drop_unread_bindings

_Site = tuple[str, str, str]
_LOOP_EXITS = (cst.Break, cst.Continue)
_NESTED = (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)


def _statement(line: cst.CSTNode) -> cst.CSTNode | None:
    """The binding a statement line is made of, or the for-loop itself."""
    if isinstance(line, cst.For) and line.asynchronous is None:
        return line
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        s = line.body[0]
        if (isinstance(s, cst.Assign) and len(s.targets) == 1) or (isinstance(s, cst.AnnAssign) and s.value is not None):
            return s
    return None


def _binds_one_of(line: cst.CSTNode, names: set[str]) -> bool:
    s = _statement(line)
    if s is None:
        return False
    target = s.target if isinstance(s, (cst.For, cst.AnnAssign)) else s.targets[0].target
    return any(isinstance(n, cst.Name) and n.value in names
               for n in ([target] if isinstance(target, cst.Name) else collect(target, lambda x: True)))


def _key(module: cst.Module, line: cst.CSTNode) -> _Site | None:
    s = _statement(line)
    if isinstance(s, cst.For):
        return "for", module.code_for_node(s.target), module.code_for_node(s.iter)
    if isinstance(s, cst.Assign):
        return "=", module.code_for_node(s.targets[0].target), module.code_for_node(s.value)
    if isinstance(s, cst.AnnAssign):
        return "=", module.code_for_node(s.target), module.code_for_node(s.value)
    return None


class _LoopExit(cst.CSTVisitor):
    """A break/continue of this loop (not of a loop or function nested in it)."""

    def __init__(self) -> None:
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, _LOOP_EXITS):
            self.found = True
        return not self.found and not isinstance(node, _NESTED)


def _unrollable(loop: cst.For) -> bool:
    if loop.orelse is not None or not isinstance(loop.body, cst.IndentedBlock):
        return False
    v = _LoopExit()
    for stmt in loop.body.body:
        stmt.visit(v)
    return not v.found


def _replacement(line: cst.CSTNode, values: dict[str, str]) -> cst.CSTNode | cst.FlattenSentinel | None:
    """One ``name = value`` per name the statement bound (so each can be propagated on its
    own); a loop keeps its body, run once."""
    s = _statement(line)
    if isinstance(s, cst.For):
        if not _unrollable(s):
            return None
        return splice([*_assignments(values), *body_statements(s.body)], line)
    if s is None or is_literal(s.value):
        return None     # already a value: nothing the run could add
    if isinstance(s.targets[0].target if isinstance(s, cst.Assign) else s.target, cst.Name):
        return line.with_changes(body=[s.with_changes(value=cst.parse_expression(next(iter(values.values()))))])
    return splice(_assignments(values), line)


def _assignments(values: dict[str, str]) -> list[cst.SimpleStatementLine]:
    return [assign(name, cst.parse_expression(text)) for name, text in values.items()]


def _targets(gate: Gate):
    sites = gate.trace.binding_sites() if gate.trace is not None else {}

    def find(module: cst.Module) -> list[cst.CSTNode]:
        if not sites:
            return []
        # a name no site binds rules a statement out before its value is rendered as text
        names = {name for _kind, target, _value in sites for name in re.findall(r"[A-Za-z_]\w*", target)}
        return [n for n in collect(module, lambda n: isinstance(n, (cst.SimpleStatementLine, cst.For))
                                   and _binds_one_of(n, names))
                if _key(module, n) in sites]

    def pair(module: cst.Module, node: cst.CSTNode) -> tuple[cst.CSTNode, cst.CSTNode] | None:
        key = _key(module, node)
        new = safe(lambda: _replacement(node, sites[key])) if key in sites else None   # type: ignore[arg-type]
        return None if new is None else (node, new)

    def alternatives(module: cst.Module, node: cst.CSTNode) -> Iterable[str | None]:
        p = pair(module, node)
        if p is not None:
            replaced = safe(lambda: replace_many(module, [p]))
            if replaced is None:
                return
            plain = safe(lambda: drop_dead_code(replaced))
            # the object that computed the value goes too (a tokenizer, once its batch is written)
            freed = safe(lambda: drop_dead_code(drop_unread_bindings(module.code, replaced)))
            yield from ([freed] if freed != plain else []) + [plain]

    def everything(module: cst.Module) -> str | None:
        # (a site inside a loop that is unrolled too waits a round: replace_many does not look
        # inside a node it replaces)
        chosen = [p for p in (pair(module, n) for n in find(module)) if p is not None]
        if len(chosen) < 2:
            return None
        out = safe(lambda: drop_dead_code(drop_unread_bindings(module.code, replace_many(module, chosen))))
        return out if out is not None and size_of(out) < size_of(module.code) else None

    return find, alternatives, everything


def recorded_bindings(gate: Gate) -> None:
    """Every recorded binding at once first (one run, often enough), then one by one.

    Removes: the computation behind a variable bound to one value (it becomes that value), and a
    loop that ran once (it becomes its body).
    Never changes: a binding whose runs saw different values, or a value with no source form
    (literals, containers of them, the script's enum members only)."""
    if gate.trace is not None:
        together_then_each(gate, *_targets(gate))
