"""Call the worker directly: the function a pool, an executor, a thread or a process would run
is called in place, so its failure is raised where a maintainer reads it — uncaught, last, in
one process — instead of logged by a worker.

    pool.submit(fn, a, b=1)                    ->  fn(a, b=1)
    pool.apply_async(fn, (a,), {"b": 1})       ->  fn(a, b=1)        (also apply)
    loop.run_in_executor(None, fn, a)          ->  fn(a)
    Thread(target=fn, args=(a,), kwargs=k)     ->  fn(a, **k)        (also Process)

The oracle decides: when the failure needs the child process (CUDA in a spawned child, frames
of multiprocessing in the signature), the direct call does not reproduce it and is dropped.
"""
from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from reducer.passes.base import Gate, collect, replace, run_targets, safe

_SUBMIT = {"submit"}
_APPLY = {"apply_async", "apply"}
_WORKERS = {"Thread", "Process"}


def _name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _positional(args: Iterable[cst.Arg]) -> list[cst.Arg]:
    return [a for a in args if a.keyword is None and not a.star]


def _keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def _spread(fn: cst.BaseExpression, args: cst.BaseExpression | None,
            kwargs: cst.BaseExpression | None) -> cst.Call:
    """``fn(*args, **kwargs)``, with a literal tuple/list/dict unpacked into plain arguments."""
    out: list[cst.Arg] = []
    if isinstance(args, (cst.Tuple, cst.List)):
        out += [cst.Arg(e.value) for e in args.elements if isinstance(e, cst.Element)]
    elif args is not None:
        out.append(cst.Arg(args, star="*"))
    if isinstance(kwargs, cst.Dict) and all(isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
                                            and e.key.value[1:-1].isidentifier() for e in kwargs.elements):
        out += [cst.Arg(e.value, keyword=cst.Name(e.key.value[1:-1]), equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            for e in kwargs.elements]
    elif kwargs is not None:
        out.append(cst.Arg(kwargs, star="**"))
    return cst.Call(func=fn, args=out)


def direct_call(call: cst.Call) -> cst.BaseExpression | None:
    """The direct call that stands for ``call``, or None when it hands no function to a worker."""
    name = _name(call.func)
    pos = _positional(call.args)
    if name in _SUBMIT and pos:
        rest = [a for a in call.args if a is not pos[0]]
        return cst.Call(func=pos[0].value, args=[a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in rest])
    if name in _APPLY and pos:
        args = pos[1].value if len(pos) > 1 else _keyword(call, "args")
        kwargs = pos[2].value if len(pos) > 2 else _keyword(call, "kwds")
        return _spread(pos[0].value, args, kwargs)
    if name == "run_in_executor" and len(pos) >= 2:
        return cst.Call(func=pos[1].value, args=[cst.Arg(a.value) for a in pos[2:]])
    if name in _WORKERS:
        target = _keyword(call, "target")
        if target is not None:
            return _spread(target, _keyword(call, "args"), _keyword(call, "kwargs"))
    return None


def _handoffs(module: cst.Module) -> list[cst.Call]:
    return collect(module, lambda n: isinstance(n, cst.Call) and _name(n.func) in
                   (_SUBMIT | _APPLY | _WORKERS | {"run_in_executor"}))


def _alternatives(module: cst.Module, call: cst.CSTNode) -> Iterable[str | None]:
    new = safe(lambda: direct_call(call))  # type: ignore[arg-type]
    if new is not None:
        yield safe(lambda: replace(module, call, new))


def call_directly(gate: Gate) -> None:
    run_targets(gate, _handoffs, _alternatives)
