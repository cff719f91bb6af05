"""Collapse classes that only hold data: ``Config.lr`` (or ``cfg.lr`` where ``cfg = Config()``)
becomes the value written in the class body, and the class goes."""
from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from reducer.analysis.cst import collect, replace_many, safe
from reducer.analysis.names import uses
from reducer.passes.base import Gate
from reducer.passes.loops import run_targets
from reducer.passes.rewrites import is_string_statement, single_bindings


def data_fields(cls: cst.ClassDef) -> dict[str, cst.BaseExpression] | None:
    """name → value for a class whose body is only ``name = value`` / ``name: T = value``."""
    if cls.bases and not all(isinstance(b.value, cst.Name) and b.value.value == "object" for b in cls.bases):
        return None
    if any(not (isinstance(d.decorator, cst.Name) and d.decorator.value == "dataclass") for d in cls.decorators):
        return None
    if not isinstance(cls.body, cst.IndentedBlock):
        return None
    fields: dict[str, cst.BaseExpression] = {}
    for stmt in cls.body.body:
        if is_string_statement(stmt):
            continue
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
            return None
        s = stmt.body[0]
        if isinstance(s, cst.Pass):
            continue
        if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name):
            fields[s.targets[0].target.value] = s.value
        elif isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name) and s.value is not None:
            fields[s.target.value] = s.value
        else:
            return None
    return fields


def _accesses(module: cst.Module, name: str) -> list[cst.Attribute]:
    return collect(module, lambda n: isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name)
                   and n.value.value == name)


def collapse(module: cst.Module, cls: cst.ClassDef) -> str | None:
    fields = data_fields(cls)
    if fields is None:
        return None
    name = cls.name.value
    used = uses(module)
    pairs: list[tuple[cst.CSTNode, object]] = [(cls, cst.RemoveFromParent())]
    direct = _accesses(module, name)
    holders = [(var, line) for var, (line, value) in single_bindings(
        module, lambda e: isinstance(e, cst.Call) and isinstance(e.func, cst.Name)
        and e.func.value == name and not e.args).items()]
    # every use of the class is `Class.field` or `var = Class()` with `var.field` uses only
    if used.get(name, 0) != len(direct) + len(holders):
        return None
    for var, line in holders:
        acc = _accesses(module, var)
        if used.get(var, 0) != len(acc):
            return None
        direct += acc
        pairs.append((line, cst.RemoveFromParent()))
    for a in direct:
        if a.attr.value not in fields:
            return None
        pairs.append((a, fields[a.attr.value]))
    return replace_many(module, pairs)


def targets(module: cst.Module) -> list[cst.ClassDef]:
    return [c for c in collect(module, lambda n: isinstance(n, cst.ClassDef)) if data_fields(c) is not None]


def _alternatives(module: cst.Module, cls: cst.CSTNode) -> Iterable[str | None]:
    yield safe(lambda: collapse(module, cls))


def collapse_classes(gate: Gate) -> None:
    """Collapse each data-only class into its values.

    Removes: a class that only holds data: ``Config.lr`` (or ``cfg.lr``) becomes the value in the
    class body, and the class goes.
    Never changes: a class whose body holds anything but ``name = value`` lines (a method, a
    base other than ``object``, a decorator other than ``@dataclass``)."""
    run_targets(gate, targets, _alternatives)
