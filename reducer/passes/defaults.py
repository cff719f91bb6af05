"""Class defaults in place of attribute reads: ``cfg.hidden_size`` becomes ``16`` where a class of
the script says ``hidden_size: int = 16``.

Training scripts carry their settings in a config class (a dataclass, or a class of plain class
attributes) built once and handed around: ``train(rank, cfg)`` through ``mp.spawn``,
``make_batches(cfg)``, ``torch.randint(0, cfg.vocab_size, ...)``. The traced run cannot always
say what such a read gave (the value goes to a builtin, or the object crossed into another
process), yet the class body spells it. Once every read is its literal, the class, the object and
the parameters that carried it are dead code.

Which object an attribute is read from is not known here, so this is a guess the run decides,
made only where it cannot be told wrong from the text alone: the name is given a literal by exactly
one class of the script (and is nothing else in any class), no attribute of that name is ever
assigned (``obj.x = ...``), and no construction of the class gives it another value
(``Config(x=3)`` gives 3 instead; a non-literal keyword, positional arguments or ``**kwargs`` at a
construction leave the name, or the class, alone). All the names at once first, then name by name.
"""
from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from reducer.analysis.cst import collect, is_literal, parse, replace_many, safe
from reducer.passes.base import Gate
from reducer.passes.rewrites import drop_dead_code

_DYNAMIC = ("setattr", "__dict__", "vars(")


def _class_literals(cls: cst.ClassDef) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    """(name, literal or None) for every name the class body binds; None: not a literal."""
    for stmt in cls.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name):
                    yield s.target.value, (s.value if s.value is not None and is_literal(s.value) else None)
                elif isinstance(s, cst.Assign):
                    for t in s.targets:
                        if isinstance(t.target, cst.Name):
                            yield t.target.value, (s.value if len(s.targets) == 1 and is_literal(s.value) else None)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            yield stmt.name.value, None


def _stored(module: cst.Module) -> set[str]:
    """Attribute names assigned anywhere (``x.name = ...``, ``x.name += ...``, ``for x.name in``)."""
    targets: list[cst.BaseExpression] = []
    for node in collect(module, lambda n: isinstance(n, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For,
                                                          cst.Del, cst.AsName))):
        if isinstance(node, cst.Assign):
            targets += [t.target for t in node.targets]
        elif isinstance(node, cst.AsName):
            targets.append(node.name)
        else:
            targets.append(node.target)
    out: set[str] = set()
    for t in targets:
        for a in collect(t, lambda n: isinstance(n, cst.Attribute)):
            out.add(a.attr.value)
    return out


def defaults(module: cst.Module) -> dict[str, cst.BaseExpression]:
    """The attribute names this pass may replace, each with its literal."""
    if any(word in module.code for word in _DYNAMIC):
        return {}
    given: dict[str, list[cst.BaseExpression | None]] = {}
    owner: dict[str, str] = {}
    for cls in collect(module, lambda n: isinstance(n, cst.ClassDef)):
        for name, value in _class_literals(cls):
            given.setdefault(name, []).append(value)
            owner[name] = cls.name.value
    found = {name: values[0] for name, values in given.items() if len(values) == 1 and values[0] is not None}
    for name in _stored(module):
        found.pop(name, None)
    # constructions of a class that hold values of their own
    override: dict[str, cst.BaseExpression] = {}
    for call in collect(module, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Name)):
        mine = [name for name in found if owner.get(name) == call.func.value]
        if not mine:
            continue
        if any(a.keyword is None for a in call.args):      # positional or */** arguments
            for name in mine:
                found.pop(name, None)
            continue
        for a in call.args:
            name = a.keyword.value
            if name not in found:
                continue
            if not is_literal(a.value) or (name in override and not override[name].deep_equals(a.value)):
                found.pop(name)
                override.pop(name, None)
            else:
                override[name] = a.value
    found.update(override)
    return found


def _reads(module: cst.Module, names: set[str]) -> list[cst.Attribute]:
    """Loads of ``x.name`` (not a call's function, not an assignment target)."""
    calls = {id(c.func) for c in collect(module, lambda n: isinstance(n, cst.Call))}
    return [a for a in collect(module, lambda n: isinstance(n, cst.Attribute))
            if a.attr.value in names and id(a) not in calls]


def _candidate(module: cst.Module, values: dict[str, cst.BaseExpression]) -> str | None:
    reads = _reads(module, set(values))
    if not reads:
        return None
    return safe(lambda: drop_dead_code(replace_many(module, [(a, values[a.attr.value].deep_clone()) for a in reads])))


def class_defaults(gate: Gate) -> None:
    """A config class's literal defaults written where ``cfg.x`` is read (all at once, then one by one).

    Removes: the reads of the class's fields, so the class and its instance can go.
    Never changes: a name more than one class gives, an attribute the script assigns anywhere, or
    one a construction of the class gives another value."""
    module = parse(gate.best)
    found = defaults(module)
    if not found:
        return
    together = _candidate(module, found)
    if together is not None and gate.consider(together):
        return
    remaining = sorted(name for name in found if _reads(module, {name}))
    while len(remaining) > 1 or (remaining and together is None):
        module = parse(gate.best)
        now = defaults(module)
        offers = ((name, _candidate(module, {name: now[name]})) for name in remaining if name in now)
        hit = gate.first((name, source) for name, source in offers if source is not None)
        if hit is None:
            return
        remaining = remaining[remaining.index(hit) + 1:]
