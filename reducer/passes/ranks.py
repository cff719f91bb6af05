"""A job whose ranks get their rank and world size as arguments, brought home as rank 0 of a
world of one: the parent calls the rank's target itself.

    mp.spawn(worker, args=(world, cfg), nprocs=world)           ->  worker(0, 1, cfg)
    start_processes(worker, (world, cfg), world, start_method=...) -> worker(0, 1, cfg)
    for r in range(world):                                       ->  run(0, 1, shards[0])
        p = ctx.Process(target=run, args=(r, world, shards[r]))
        p.start(); procs.append(p)
    procs = [ctx.Process(target=run, args=(r, n)) for r in range(n)]  ->  run(0, 1)
                                                                        procs = []

torchrun and ``accelerate launch`` hand a rank its place through the environment, which the
launch-line machinery sets (reducer/run/rank_launch.py); a job started by ``mp.spawn`` or by a
``Process`` per rank hands it as arguments, so the world size is wherever the script spelled the
number of processes: every argument written as that expression (``nprocs=world`` and
``args=(world, ...)``; ``range(world)`` and ``args=(r, world, ...)``) becomes 1, the rank (the
first argument spawn passes, or the loop's variable) 0. A process group of one joins at once,
so a failure that does not need a peer (an unused parameter, a checkpointed backward, a forward)
is raised in the parent at in-process speed, and the boundary call, the trace and every later
run are in-process. One that needs a peer (shapes compared across ranks, a collective) does not
show, and the oracle drops the candidate: one run.

A two-rank job whose failing rank is the second (its data chosen by its rank: a shard, a task
list) does not fail as rank 0; the next candidate calls it as rank 1, its place in the process
group still 0 of 1 (every ``rank=`` keyword of a call, as ``init_process_group`` and
``DistributedSampler`` take it, made 0), so what the rank reads is rank 1's and the group is one.

The loop's start/join loops (``for p in procs: p.start()``) go with the processes, so the
candidate starts fewer processes and the size order runs it even when the call is longer
(reducer/analysis/size.py).
"""
from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from reducer.analysis.cst import called_name, collect, parse, replace_many, safe

_SPAWNERS = {"spawn", "start_processes"}
_PROCESS_METHODS = {"start", "join", "terminate", "kill", "close"}


def _arg(call: cst.Call, at: int | None, keyword: str) -> cst.BaseExpression | None:
    """Argument ``keyword`` of ``call``, given by keyword or (``at`` not None) as the ``at``-th
    positional."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == keyword:
            return a.value
    pos = [a for a in call.args if a.keyword is None and not a.star]
    return pos[at].value if at is not None and len(pos) > at else None


def _elements(args: cst.BaseExpression | None) -> list[cst.BaseExpression] | None:
    """The expressions of a literal tuple or list of arguments; None when it is not one."""
    if args is None:
        return []
    if isinstance(args, (cst.Tuple, cst.List)) and all(isinstance(e, cst.Element) for e in args.elements):
        return [e.value for e in args.elements]
    return None


class _Substitute(cst.CSTTransformer):
    """Every read of the rank variable → 0, every expression spelled as the world size → 1.
    An attribute's own name and a keyword's name are not reads."""

    def __init__(self, code: cst.Module, rank: str | None, world: str | None, as_rank: int) -> None:
        self.code, self.rank, self.world, self.as_rank = code, rank, world, as_rank

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        if self.world is not None and isinstance(original, cst.BaseExpression) \
                and self.code.code_for_node(original) == self.world:
            return cst.Integer("1")
        if isinstance(original, cst.Attribute):
            return updated.with_changes(attr=original.attr)
        if isinstance(original, cst.Arg):
            return updated.with_changes(keyword=original.keyword)
        if isinstance(original, cst.Name) and original.value == self.rank:
            return cst.Integer(str(self.as_rank))
        return updated


def _substituted(module: cst.Module, exprs: list[cst.BaseExpression], rank: str | None,
                 world: cst.BaseExpression | None, as_rank: int) -> list[cst.BaseExpression]:
    sub = _Substitute(module, rank, module.code_for_node(world) if world is not None else None, as_rank)
    return [e.visit(sub) for e in exprs]


def _call(fn: cst.BaseExpression, args: list[cst.BaseExpression],
          kwargs: cst.BaseExpression | None = None) -> cst.SimpleStatementLine:
    out = [cst.Arg(a) for a in args]
    if kwargs is not None:
        out.append(cst.Arg(kwargs, star="**"))
    return cst.SimpleStatementLine([cst.Expr(cst.Call(func=fn, args=out))])


def _spawn_homes(module: cst.Module, as_rank: int) -> Iterable[str | None]:
    """``mp.spawn(fn, args, nprocs)`` / ``start_processes(...)``: the statement that starts the
    ranks becomes ``fn(0, *args)`` with the world size 1."""
    calls = collect(module, lambda n: isinstance(n, cst.Call) and called_name(n.func) in _SPAWNERS)
    for call in calls:
        fn, nprocs = _arg(call, 0, "fn"), _arg(call, 2, "nprocs")
        args = _elements(_arg(call, 1, "args"))
        if fn is None or args is None or not isinstance(fn, (cst.Name, cst.Attribute)):
            continue
        stmts = collect(module, lambda n, call=call: isinstance(n, cst.SimpleStatementLine)
                        and any(c is call for c in collect(n, lambda m: isinstance(m, cst.Call))))
        if len(stmts) != 1:
            continue
        home = _call(fn, [cst.Integer(str(as_rank))] + _substituted(module, args, None, nprocs, as_rank))
        yield safe(lambda: replace_many(module, [(stmts[0], home)]))


def _range_bound(it: cst.BaseExpression) -> cst.BaseExpression | None:
    if isinstance(it, cst.Call) and called_name(it.func) == "range" and len(it.args) == 1 \
            and it.args[0].keyword is None:
        return it.args[0].value
    return None


def _process(node: cst.CSTNode) -> cst.Call | None:
    if isinstance(node, cst.Call) and called_name(node.func) == "Process":
        return node
    return None


def _direct(module: cst.Module, proc: cst.Call, rank: str, world: cst.BaseExpression,
            as_rank: int) -> cst.SimpleStatementLine | None:
    target = _arg(proc, None, "target")
    args = _elements(_arg(proc, None, "args"))
    if target is None or args is None:
        return None
    kwargs = _arg(proc, None, "kwargs")
    new_args = _substituted(module, args, rank, world, as_rank)
    new_kwargs = _substituted(module, [kwargs], rank, world, as_rank)[0] if kwargs is not None else None
    return _call(target, new_args, new_kwargs)


def _process_loops(module: cst.Module, names: set[str]) -> list[cst.For]:
    """``for p in procs: p.start()`` and its kin over a list the candidate no longer fills."""
    def only_methods(loop: cst.For) -> bool:
        if not (isinstance(loop.iter, cst.Name) and loop.iter.value in names and isinstance(loop.target, cst.Name)
                and isinstance(loop.body, cst.IndentedBlock)):
            return False
        var = loop.target.value
        for stmt in loop.body.body:
            if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                    and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.Call)):
                return False
            func = stmt.body[0].value.func
            if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == var
                    and func.attr.value in _PROCESS_METHODS):
                return False
        return True
    return collect(module, lambda n: isinstance(n, cst.For) and only_methods(n))


def _appended_to(loop: cst.For) -> set[str]:
    """Names of the lists a loop appends its processes to (``procs.append(p)``)."""
    calls = collect(loop, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                    and n.func.attr.value == "append" and isinstance(n.func.value, cst.Name))
    return {c.func.value.value for c in calls}


def _loop_homes(module: cst.Module, as_rank: int) -> Iterable[str | None]:
    """A ``Process`` per rank made in ``for r in range(world)`` or ``[... for r in range(world)]``."""
    for loop in collect(module, lambda n: isinstance(n, cst.For) and isinstance(n.target, cst.Name)
                        and _range_bound(n.iter) is not None):
        procs = collect(loop, lambda n: _process(n) is not None)
        if len(procs) != 1:
            continue
        home = _direct(module, procs[0], loop.target.value, _range_bound(loop.iter), as_rank)
        if home is None:
            continue
        pairs = [(loop, home)] + [(f, cst.RemoveFromParent()) for f in _process_loops(module, _appended_to(loop))]
        yield safe(lambda pairs=pairs: replace_many(module, pairs))
    for stmt in collect(module, lambda n: isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1
                        and isinstance(n.body[0], cst.Assign) and len(n.body[0].targets) == 1
                        and isinstance(n.body[0].targets[0].target, cst.Name)
                        and isinstance(n.body[0].value, (cst.ListComp, cst.GeneratorExp))):
        comp = stmt.body[0].value
        proc = _process(comp.elt)
        fr = comp.for_in
        if proc is None or fr.inner_for_in is not None or fr.ifs or not isinstance(fr.target, cst.Name) \
                or _range_bound(fr.iter) is None:
            continue
        home = _direct(module, proc, fr.target.value, _range_bound(fr.iter), as_rank)
        if home is None:
            continue
        name = stmt.body[0].targets[0].target.value
        # the list stays, empty: whatever the parent does with it after the ranks (join them,
        # read their exit codes) still runs, on no process
        empty = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], cst.List([]))])
        pairs = [(stmt, cst.FlattenSentinel([home, empty]))]
        pairs += [(f, cst.RemoveFromParent()) for f in _process_loops(module, {name})]
        yield safe(lambda pairs=pairs: replace_many(module, pairs))


class _PlaceInGroup(cst.CSTTransformer):
    """Every ``rank=`` keyword of a call (``init_process_group``, ``DistributedSampler``,
    ``new_group``...) → ``rank=0``: the process's place in its group of one."""

    def __init__(self) -> None:
        self.changed = False

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        if original.keyword is not None and original.keyword.value == "rank" and not (
                isinstance(original.value, cst.Integer) and original.value.value == "0"):
            self.changed = True
            return updated.with_changes(value=cst.Integer("0"))
        return updated


def _as_rank_in_group_of_one(source: str) -> str | None:
    module = parse(source)
    place = _PlaceInGroup()
    out = safe(lambda: module.visit(place).code)
    return out if place.changed else None


def rank_homes(source: str) -> list[str]:
    """The candidates that call one rank's target in the parent, in the script's order: first as
    rank 0 of a world of one; then as rank 1 (a two-rank job whose failing rank is the second, its
    data chosen by its rank) whose place in the process group is still 0 of 1 (every ``rank=``
    keyword of a call made 0). None when the script starts no rank this way."""
    module = parse(source)
    out = [s for s in list(_spawn_homes(module, 0)) + list(_loop_homes(module, 0)) if s is not None]
    second = [s for s in list(_spawn_homes(module, 1)) + list(_loop_homes(module, 1)) if s is not None]
    out += [t for t in map(_as_rank_in_group_of_one, second) if t is not None]
    return list(dict.fromkeys(s for s in out if s != source))
