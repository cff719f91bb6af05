"""Parameters a function never reads go, with what every call site passes for them — direct
calls and the hand-offs that run the function elsewhere:

    def probe(index, entries, out_dir):          def probe(entries):
        for e in entries: ...                  ->    for e in entries: ...
    Process(target=probe, args=(0, xs, tmp))     Process(target=probe, args=(xs,))

A positional argument cannot simply be deleted at a call (the rest would shift onto the wrong
parameters), and a worker's arguments sit in a tuple that the argument passes do not see; taking
the parameter and its arguments out together does both. Whatever built the dropped values is
then dead code. A function whose name is used in any other way (stored, passed elsewhere,
decorated, a method) is left alone: not every caller would be seen.
"""
from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from reducer.analysis.cst import collect, parse, replace_many, safe
from reducer.passes.base import Gate
from reducer.passes.loops import run_targets
from reducer.passes.rewrites import drop_dead_code, parameter_slots, without_trailing_comma

_WORKERS = {"Process", "Thread"}
_DYNAMIC = {"locals", "vars", "eval", "exec"}


def _callee(call: cst.Call) -> str | None:
    f = call.func
    return f.value if isinstance(f, cst.Name) else f.attr.value if isinstance(f, cst.Attribute) else None


def _keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


class _Site:
    """One place the function is called or handed off, and how to drop one argument there."""

    def __init__(self, call: cst.Call, kind: str) -> None:
        self.call, self.kind = call, kind      # kind: "call" | "worker" | "submit"

    def without(self, fn: cst.FunctionDef, param: cst.Param) -> cst.Call | None:
        """The call with ``param``'s argument removed; None when it cannot be told apart."""
        positional = list(fn.params.posonly_params) + list(fn.params.params)
        index = next((i for i, p in enumerate(positional) if p is param), None)
        if self.kind == "call":
            if any(a.star for a in self.call.args):
                return None
            pairs = parameter_slots(self.call, fn)
            if len(pairs) != len(self.call.args):
                return None
            keep = [a for a, p in pairs if p is not param]
            return self.call.with_changes(args=without_trailing_comma(keep))
        if self.kind == "worker":
            args = _keyword(self.call, "args")
            if _keyword(self.call, "kwargs") is not None:
                return None
            if args is None:
                return self.call if param.default is not None or index is None else None
            if not isinstance(args.value, (cst.Tuple, cst.List)) or index is None:
                return None
            items = list(args.value.elements)
            if any(not isinstance(e, cst.Element) for e in items):
                return None
            if index >= len(items):
                return self.call
            items = items[:index] + items[index + 1:]
            if isinstance(args.value, cst.Tuple) and len(items) == 1:
                items = [items[0].with_changes(comma=cst.Comma())]     # (x,) stays a tuple
            else:
                items = without_trailing_comma(items)
            new_args = args.with_changes(value=args.value.with_changes(elements=items))
            return self.call.with_changes(args=[new_args if a is args else a for a in self.call.args])
        # submit(fn, *args, **kwargs): the arguments after the function line up as in a call
        rest = cst.Call(func=cst.Name(fn.name.value), args=self.call.args[1:])
        dropped = _Site(rest, "call").without(fn, param)
        if dropped is None:
            return None
        return self.call.with_changes(args=[self.call.args[0], *dropped.args])


def _sites(module: cst.Module, fn: cst.FunctionDef) -> list[_Site] | None:
    """Every use of the function's name, each a call or a hand-off; None if any is not."""
    name = fn.name.value
    uses = [n for n in collect(module, lambda n: isinstance(n, cst.Name) and n.value == name) if n is not fn.name]
    where: dict[int, _Site] = {}
    for call in collect(module, lambda n: isinstance(n, cst.Call)):
        where.setdefault(id(call.func), _Site(call, "call"))
        target = _keyword(call, "target")
        if _callee(call) in _WORKERS and target is not None:
            where.setdefault(id(target.value), _Site(call, "worker"))
        if _callee(call) == "submit" and call.args and call.args[0].keyword is None:
            where.setdefault(id(call.args[0].value), _Site(call, "submit"))
    sites = [where.get(id(use)) for use in uses]
    return None if any(s is None for s in sites) else sites  # type: ignore[return-value]


def _reads(fn: cst.FunctionDef) -> set[str]:
    """Every identifier in the body (coarse: an attribute named like a parameter counts)."""
    return {n.value for n in collect(fn.body, lambda n: isinstance(n, cst.Name))}


def _unused(module: cst.Module) -> list[tuple[cst.FunctionDef, cst.Param]]:
    out = []
    for fn in collect(module, lambda n: isinstance(n, cst.FunctionDef)):
        if fn.decorators or fn.asynchronous is not None:
            continue
        read = _reads(fn)
        if read & _DYNAMIC:
            continue
        params = list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)
        if params and params[0].name.value in ("self", "cls"):
            continue
        out += [(fn, p) for p in params if p.name.value not in read]
    return out


def _dropped(module: cst.Module, fn: cst.FunctionDef, param: cst.Param) -> list[tuple[cst.CSTNode, cst.CSTNode]] | None:
    sites = _sites(module, fn)
    if sites is None:
        return None
    pairs: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    for site in sites:
        new = site.without(fn, param)
        if new is None:
            return None
        if new is not site.call:
            pairs.append((site.call, new))
    params = fn.params
    fields = {k: without_trailing_comma([p for p in getattr(params, k) if p is not param])
              for k in ("posonly_params", "params", "kwonly_params")}
    star = params.star_arg
    if not fields["kwonly_params"] and isinstance(star, cst.ParamStar):
        star = cst.MaybeSentinel.DEFAULT        # a bare `*` needs a keyword-only parameter after it
    pairs.append((params, params.with_changes(star_arg=star, **fields)))
    return pairs


def _targets(module: cst.Module) -> list[cst.Param]:
    return [p for fn, p in _unused(module)]


def _alternatives(module: cst.Module, param: cst.CSTNode) -> Iterable[str | None]:
    for fn, p in _unused(module):
        if p is param:
            pairs = safe(lambda: _dropped(module, fn, p))      # type: ignore[arg-type]
            if pairs:
                yield safe(lambda: drop_dead_code(replace_many(module, pairs)))
            return


def drop_unused_parameters(gate: Gate) -> None:
    """One parameter at a time, first to last (removing one never makes another one read).

    Removes: a parameter its function never reads, with what every call site (and every hand-off to
    a worker) passes for it.
    Never changes: a function whose name is used other than by a call or a hand-off (stored,
    passed, decorated, a method): not every caller would be seen."""
    if not _unused(parse(gate.best)):
        return
    run_targets(gate, _targets, _alternatives)
