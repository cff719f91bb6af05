"""Call the worker directly: the function a pool, an executor, a thread or a process would run
is called in place, so its failure is raised where a maintainer reads it — uncaught, last, in
one process — instead of logged by a worker.

    pool.submit(fn, a, b=1)                    ->  fn(a, b=1)
    pool.apply_async(fn, (a,), {"b": 1})       ->  fn(a, b=1)        (also apply)
    loop.run_in_executor(None, fn, a)          ->  fn(a)
    Thread(target=fn, args=(a,), kwargs=k)     ->  fn(a, **k)        (also Process)
    Worker(q).start() / w.start(); w.join()    ->  Worker(q).run() / w.run()   (a script's own
                                                   subclass of Thread or Process)

A map's results are the calls' results, so where they are consumed (iterated by a loop or a
comprehension, handed to list(), sorted(), ...), the calls can be made where they are consumed:

    for r in executor.map(fn, xs)              ->  for r in map(fn, xs)   (also pool.imap, imap_unordered)
    list(pool.map(fn, xs))                     ->  [fn(x) for x in xs]
    list(pool.starmap(fn, pairs))              ->  [fn(*x) for x in pairs]
    list(pool.map(fn, [a]))                    ->  [fn(a)], or fn(a) as a statement of its own
    pool.starmap(fn, [(a, b)])                 ->  [fn(a, b)]

A map whose results nobody reads is left alone: an executor's map would never raise there, and
a direct call that does is a different program.

The oracle decides: when the failure needs the child process (CUDA in a spawned child, frames
of multiprocessing in the signature), the direct call does not reproduce it and is dropped.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst

from reducer.analysis.cst import called_name, collect, parse, replace, replace_many, safe
from reducer.analysis.names import Role, census
from reducer.passes.base import Gate
from reducer.passes.loops import run_targets
from reducer.passes.ranks import rank_homes
from reducer.passes.rewrites import keyword_arg, one_step

_SUBMIT = {"submit"}
_APPLY = {"apply_async", "apply"}
_WORKERS = {"Thread", "Process"}


_name = called_name


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
        out += [keyword_arg(e.key.value[1:-1], e.value) for e in kwargs.elements]
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


# Where a pool or an executor takes its initializer and its arguments positionally:
# multiprocessing's Pool(processes, initializer, initargs), concurrent.futures'
# ProcessPoolExecutor(max_workers, mp_context, initializer, initargs) (ThreadPoolExecutor's
# second positional is a thread name prefix: keywords only there).
_INIT_AT = {"Pool": (1, 2), "ProcessPoolExecutor": (2, 3)}


def _pool_of(module: cst.Module, call: cst.Call) -> cst.Call | None:
    """The constructor call of the pool or executor ``call`` (a hand-off or a map) is made on:
    the receiver itself, or what its name was bound to (``pool = Pool(...)``, ``with Pool(...) as pool``)."""
    if not isinstance(call.func, cst.Attribute):
        return None
    receiver = call.func.value
    if isinstance(receiver, cst.Call):
        return receiver
    if not isinstance(receiver, cst.Name):
        return None
    made = [n.value for n in collect(module, lambda n: isinstance(n, cst.Assign) and len(n.targets) == 1
                                     and isinstance(n.targets[0].target, cst.Name)
                                     and n.targets[0].target.value == receiver.value and isinstance(n.value, cst.Call))]
    made += [n.item for n in collect(module, lambda n: isinstance(n, cst.WithItem) and isinstance(n.item, cst.Call)
                                     and isinstance(n.asname, cst.AsName) and isinstance(n.asname.name, cst.Name)
                                     and n.asname.name.value == receiver.value)]
    return made[0] if len(made) == 1 else None


def initializer_call(module: cst.Module, call: cst.Call) -> cst.Call | None:
    """``init(*initargs)`` of the pool ``call`` hands its work to, or None when it has none: a
    worker of such a pool runs it once before any task, so the task called in the parent needs
    it first (a model loaded into a global, threads set)."""
    pool = _pool_of(module, call)
    if pool is None:
        return None
    at = _INIT_AT.get(_name(pool.func) or "")
    pos = _positional(pool.args)
    init = _keyword(pool, "initializer") or (pos[at[0]].value if at and len(pos) > at[0] else None)
    if init is None or isinstance(init, cst.Name) and init.value == "None":
        return None
    args = _keyword(pool, "initargs") or (pos[at[1]].value if at and len(pos) > at[1] else None)
    return _spread(init, args, None)


class _InitFirst(cst.CSTTransformer):
    """``call`` → ``new``, with ``init`` as a statement of its own just before the statement
    that holds the call (in its innermost block)."""

    def __init__(self, call: cst.CSTNode, new: cst.CSTNode, init: cst.Call) -> None:
        self.call, self.new, self.init = call, new, cst.SimpleStatementLine([cst.Expr(init)])
        self.done = False

    def leave_Call(self, original, updated):
        return self.new if original is self.call else updated

    def _block(self, original, updated):
        if self.done:
            return updated
        for i, stmt in enumerate(original.body):
            if collect(stmt, lambda n: n is self.call):
                self.done = True
                body = list(updated.body)
                return updated.with_changes(body=body[:i] + [self.init] + body[i:])
        return updated

    def leave_IndentedBlock(self, original, updated):
        return self._block(original, updated)

    def leave_Module(self, original, updated):
        return self._block(original, updated)


def _with_initializer(module: cst.Module, call: cst.Call, old: cst.CSTNode, new: cst.CSTNode) -> str | None:
    """``old`` → ``new`` in the module, the pool's initializer called first when it has one."""
    init = safe(lambda: initializer_call(module, call))
    if init is None:
        return safe(lambda: replace(module, old, new))
    return safe(lambda: module.visit(_InitFirst(old, new, init)).code)


def _alternatives(module: cst.Module, call: cst.CSTNode) -> Iterable[str | None]:
    new = safe(lambda: direct_call(call))  # type: ignore[arg-type]
    if new is not None:
        yield _with_initializer(module, call, call, new)  # type: ignore[arg-type]


def call_directly(gate: Gate) -> None:
    """Call each hand-off's target in place, then each consumed pool map as a builtin map.

    Removes: the hand-off of a function to a pool, an executor, a thread or a process
    (``pool.submit(fn, a)`` → ``fn(a)``), the start of the script's own Thread or Process
    subclass (``w.start()`` → ``w.run()``, its ``join()`` gone), and a map over a pool where its
    results are consumed;
    a pool made with an ``initializer`` has it called first, as its worker would
    (``init(*initargs)`` just before the statement).
    Never changes: the function called, its arguments, or where its results are consumed; a
    hand-off whose results are never read is left to the other passes."""
    run_targets(gate, _handoffs, _alternatives)
    run_targets(gate, _starts, _start_alternatives)
    run_targets(gate, _map_sites, _map_alternatives)


# ---- a script's own Thread or Process subclass, started -------------------------------------------
def _worker_classes(module: cst.Module) -> set[str]:
    return {c.name.value for c in collect(module, lambda n: isinstance(n, cst.ClassDef))
            if any(_name(b.value) in _WORKERS for b in c.bases)}


def _starts(module: cst.Module) -> list[cst.Call]:
    """``.start()`` of an object of the script's own worker class: made there (``Worker(q).start()``)
    or bound to a name once (``w = Worker(q)``)."""
    classes = _worker_classes(module)
    if not classes:
        return []
    made = lambda v: isinstance(v, cst.Call) and _name(v.func) in classes      # noqa: E731
    bound = [t.target.value for a in collect(module, lambda n: isinstance(n, cst.Assign) and made(n.value))
             for t in a.targets if isinstance(t.target, cst.Name)]
    once = {n for n in bound if bound.count(n) == 1}
    return [c for c in collect(module, lambda n: isinstance(n, cst.Call) and not n.args
                               and isinstance(n.func, cst.Attribute) and n.func.attr.value == "start")
            if made(c.func.value) or (isinstance(c.func.value, cst.Name) and c.func.value.value in once)]


def _start_alternatives(module: cst.Module, call: cst.Call) -> Iterable[str | None]:
    """``run()`` in place of ``start()``: the thread's (or process's) work done by the caller,
    before the next statement; a ``join()`` of that object, which would now find it never
    started, goes."""
    pairs: list = [(call, call.with_changes(func=call.func.with_changes(attr=cst.Name("run"))))]
    receiver = call.func.value
    if isinstance(receiver, cst.Name):
        pairs += [(line, cst.RemovalSentinel.REMOVE) for line in collect(
            module, lambda n: isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1
            and isinstance(n.body[0], cst.Expr) and isinstance(n.body[0].value, cst.Call)
            and isinstance(n.body[0].value.func, cst.Attribute) and n.body[0].value.func.attr.value == "join"
            and isinstance(n.body[0].value.func.value, cst.Name) and n.body[0].value.func.value.value == receiver.value)]
    yield safe(lambda: replace_many(module, pairs))


# ---- a pool's or executor's map, where its results are consumed ------------------------------
_MAPS = {"map", "imap", "imap_unordered"}
_STARMAPS = {"starmap"}
# Builtins that iterate what they are given (so a map handed to one has its failures raised),
# and methods that do the same with their argument.
_CONSUMERS = {"list", "tuple", "set", "frozenset", "sorted", "sum", "min", "max", "any", "all",
              "dict", "next", "enumerate", "zip"}
_CONSUMING_METHODS = {"join", "extend", "update"}


@dataclass(frozen=True)
class MapSite:
    """A map whose results are consumed: ``outer`` is what a rewrite replaces (``list(...)``
    around the map when there is one, else the map call); ``statement`` when ``outer`` is a
    statement of its own, so nothing reads its value; ``bound``: the names the map is assigned
    to, which must be read somewhere for its results to be consumed."""

    call: cst.Call
    outer: cst.BaseExpression
    statement: bool = False
    bound: tuple[str, ...] = ()


def _mapped(call: cst.Call) -> tuple[cst.BaseExpression, list[cst.BaseExpression]] | None:
    """The function and the iterables of ``X.map(fn, ...)`` and its kin, or None."""
    name = _name(call.func)
    if not isinstance(call.func, cst.Attribute) or name not in _MAPS | _STARMAPS:
        return None
    pos = [a.value for a in _positional(call.args)]
    if len(pos) < 2:
        return None
    if name == "map":
        # Executor.map takes more iterables; Pool.map's third positional is a chunk size.
        return pos[0], [pos[1]] + [p for p in pos[2:] if not isinstance(p, cst.Integer)]
    return pos[0], [pos[1]]


class _MapSites(cst.CSTVisitor):
    def __init__(self) -> None:
        self.stack: list[cst.CSTNode] = []
        self.found: list[MapSite] = []
        self.loaded: dict[str, int] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Name):
            self.loaded[node.value] = self.loaded.get(node.value, 0) + 1
        if isinstance(node, cst.Call) and _mapped(node) is not None:
            site = self._consumed(node)
            if site is not None:
                self.found.append(site)
        self.stack.append(node)
        return True

    def on_leave(self, original: cst.CSTNode) -> None:
        self.stack.pop()

    def _consumed(self, call: cst.Call) -> MapSite | None:
        parent = self.stack[-1] if self.stack else None
        grand = self.stack[-2] if len(self.stack) > 1 else None
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is call:
            return MapSite(call, call)
        if isinstance(parent, (cst.StarredElement, cst.From)):
            return MapSite(call, call)
        if isinstance(parent, cst.Arg) and isinstance(grand, cst.Call) and parent.keyword is None:
            if parent.star == "*":
                return MapSite(call, call)
            if isinstance(grand.func, cst.Name) and grand.func.value in _CONSUMERS or \
                    isinstance(grand.func, cst.Attribute) and grand.func.attr.value in _CONSUMING_METHODS:
                wraps = isinstance(grand.func, cst.Name) and grand.func.value == "list" and len(grand.args) == 1
                outer = grand if wraps else call
                great = self.stack[-3] if len(self.stack) > 2 else None
                return MapSite(call, outer, wraps and isinstance(great, cst.Expr))
        if isinstance(parent, cst.Assign) and all(isinstance(t.target, cst.Name) for t in parent.targets):
            return MapSite(call, call, bound=tuple(t.target.value for t in parent.targets))  # type: ignore[union-attr]
        return None


def _map_sites(module: cst.Module) -> list[MapSite]:
    v = _MapSites()
    module.visit(v)
    # `results = executor.map(...)` with `results` never read again: the results are dropped.
    # The names are counted once the whole module is walked, so a read after the map counts.
    return [s for s in v.found if all(v.loaded.get(n, 0) > 1 for n in s.bound)]


def _fresh(module: cst.Module, want: str = "x") -> str:
    taken = {n.value for n in collect(module, lambda n: isinstance(n, cst.Name))}
    name, k = want, 0
    while name in taken:
        k += 1
        name = f"{want}{k}"
    return name


def map_rewrites(module: cst.Module, site: MapSite, eager: bool = False) -> list[tuple[cst.CSTNode, cst.BaseExpression]]:
    """(node to replace, its replacement) pairs for a consumed map, most direct first. ``eager``:
    the map returns its list itself (``multiprocessing.Pool.map``/``starmap``), so the call
    alone, unconsumed (``tagged = pool.starmap(fn, jobs)``), is that list comprehension too."""
    fn, iterables = _mapped(site.call)  # type: ignore[misc]
    star = _name(site.call.func) in _STARMAPS
    out: list[tuple[cst.CSTNode, cst.BaseExpression]] = []
    one = one_step(iterables[0]) if len(iterables) == 1 else None
    if isinstance(one, cst.Tuple) and not one.lpar:
        one = one.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    if one is not None:
        direct = _spread(fn, one, None) if star else cst.Call(func=fn, args=[cst.Arg(one)])
        if site.statement:
            out.append((site.outer, direct))
        out.append((site.outer, cst.List([cst.Element(direct)])))
    if site.outer is not site.call or eager:
        x = cst.Name(_fresh(module))
        source = iterables[0] if len(iterables) == 1 else cst.Call(cst.Name("zip"), [cst.Arg(i) for i in iterables])
        spread = star or len(iterables) > 1
        out.append((site.outer, cst.ListComp(
            elt=cst.Call(func=fn, args=[cst.Arg(x, star="*" if spread else "")]),
            for_in=cst.CompFor(target=x, iter=source))))
    if not star:
        out.append((site.call, cst.Call(cst.Name("map"), [cst.Arg(fn)] + [cst.Arg(i) for i in iterables])))
    return out


def _map_alternatives(module: cst.Module, site: MapSite) -> Iterable[str | None]:
    pool = _pool_of(module, site.call)
    # heldout8's zero-shot tagger: `with ctx.Pool(2) as pool: tagged = pool.starmap(fn, jobs)`
    # had no candidate (its jobs a name, its result not consumed in place), so the pool stayed
    eager = pool is not None and _name(pool.func) == "Pool" and _name(site.call.func) in ("map", "starmap")
    for old, new in map_rewrites(module, site, eager):
        yield _with_initializer(module, site.call, old, new)


# ---- bring the failure home: a child's target called in the parent, where it would be joined ---
_PROCESSES = {"Process"}


@dataclass(frozen=True)
class Child:
    """``name = ctx.Process(target=fn, args=...)``, with its ``name.start()`` and ``name.join()``
    statements (the join may be missing)."""

    create: cst.Call
    start: cst.SimpleStatementLine
    join: cst.SimpleStatementLine | None


def _method_statement(stmt: cst.CSTNode, obj: str, method: str) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    expr = stmt.body[0]
    call = expr.value if isinstance(expr, cst.Expr) else None
    return (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == method
            and isinstance(call.func.value, cst.Name) and call.func.value.value == obj)


def _children(module: cst.Module) -> list[Child]:
    creations: dict[str, cst.Call] = {}
    for stmt in collect(module, lambda n: isinstance(n, cst.Assign) and len(n.targets) == 1
                        and isinstance(n.targets[0].target, cst.Name) and isinstance(n.value, cst.Call)
                        and _name(n.value.func) in _PROCESSES and _keyword(n.value, "target") is not None):
        creations[stmt.targets[0].target.value] = stmt.value  # type: ignore[union-attr]
    found = []
    for name, call in creations.items():
        starts = collect(module, lambda n, name=name: _method_statement(n, name, "start"))
        joins = collect(module, lambda n, name=name: _method_statement(n, name, "join"))
        if len(starts) == 1 and len(joins) <= 1:
            found.append(Child(call, starts[0], joins[0] if joins else None))
    return found


_FEEDS = {"put", "put_nowait", "send", "send_bytes"}


def _feeds(stmt: cst.CSTNode) -> bool:
    """``q.put(x)`` and its kin as a statement: the parent handing the child its work."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return False
    call = stmt.body[0].value
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in _FEEDS


class _Move(cst.CSTTransformer):
    """Drop ``start`` (and the ``join`` of a process that is no longer started) and put ``call``
    right after ``anchor``, a statement of the same block."""

    def __init__(self, start: cst.CSTNode, anchor: cst.CSTNode, call: cst.SimpleStatementLine,
                 join: cst.CSTNode | None = None) -> None:
        self.start, self.anchor, self.call, self.join = start, anchor, call, join

    def _block(self, body):
        if not any(s is self.start for s in body) or not any(s is self.anchor for s in body):
            return None
        out = []
        for stmt in body:
            if stmt is not self.start and stmt is not self.join:
                out.append(stmt)
            if stmt is self.anchor:
                out.append(self.call)
        return out

    def leave_IndentedBlock(self, original, updated):
        new = self._block(original.body)
        return updated if new is None else updated.with_changes(body=new)

    def leave_SimpleStatementLine(self, original, updated):
        # a join elsewhere than the start's block
        return cst.RemoveFromParent() if original is self.join else updated

    def leave_Module(self, original, updated):
        new = self._block(original.body)
        return updated if new is None else updated.with_changes(body=new)


def _homes(module: cst.Module, child: Child) -> list[str]:
    """Where the target may be called instead, first the likeliest to see the child's work in
    place: right after the parent's last hand-off (``q.put``) that follows the start, before
    anything reads the child's results; where it was started; where the parent joins it."""
    direct = direct_call(child.create)
    if direct is None:
        return []
    call = cst.SimpleStatementLine([cst.Expr(direct)])
    out: list[str | None] = []
    after = _after_start(module, child.start, collect(module, _feeds))
    if after is not None:
        out.append(safe(lambda: module.visit(_Move(child.start, after, call, child.join)).code))
    # Where it was started (its join goes: a process never started cannot be joined) before
    # where it is joined: a parent that reads the child's results between the two would wait
    # for them at the join, and only the hand-off case above feeds the child after its start.
    pairs: list[tuple[cst.CSTNode, object]] = [(child.start, call)]
    if child.join is not None:
        pairs.append((child.join, cst.RemoveFromParent()))
    out.append(safe(lambda: replace_many(module, pairs)))
    if child.join is not None:
        out.append(_at_join(module, child, call))
    return [s for s in dict.fromkeys(out) if s is not None]


def _after_start(module: cst.Module, start: cst.CSTNode, feeds: list[cst.CSTNode]) -> cst.CSTNode | None:
    """The last hand-off statement after ``start`` in the same block, if any."""
    for block in collect(module, lambda n: isinstance(n, (cst.IndentedBlock, cst.Module))):
        body = list(block.body)
        if any(s is start for s in body):
            i = next(k for k, s in enumerate(body) if s is start)
            later = [s for s in body[i + 1:] if any(s is f for f in feeds)]
            return later[-1] if later else None
    return None


def _at_join(module: cst.Module, child: Child, call: cst.SimpleStatementLine) -> str | None:
    without_start = safe(lambda: replace(module, child.start, cst.RemoveFromParent()))
    if without_start is None:
        return None
    again = parse(without_start)
    joins = collect(again, lambda n: isinstance(n, cst.SimpleStatementLine) and again.code_for_node(n)
                    == module.code_for_node(child.join))
    return safe(lambda: replace(again, joins[0], call)) if len(joins) == 1 else None


def bring_home(gate: Gate) -> None:
    """Before anything else, when the script starts its work in a child process: one candidate
    per child that runs the child's target in the parent instead. If the failure still shows
    (the signature's library frames do not need the process), every later candidate runs at
    in-process speed, without a second interpreter's imports and model build.

    A job whose ranks take their rank and world size as arguments (``mp.spawn``, a ``Process``
    per rank) comes home as rank 0 of a world of one (reducer/passes/ranks.py), first: calling a
    rank's target in place with the world it was given would wait for peers that never start.

    Removes: the child process (or process pool, executor, the ranks) that ran the script's work:
    its target is called in the parent (a pool's initializer first; a rank as rank 0 of one).
    Never changes: the target function, its arguments other than a rank's place, or the order of
    the calls it makes."""
    for source in rank_homes(gate.best):
        if gate.consider(source):
            return
    module = parse(gate.best)
    for child in _children(module):
        for source in _homes(module, child):
            if gate.consider(source):
                return
    # A process pool's or executor's task, submitted or mapped: the call_directly candidates
    # (the initializer first where the pool has one), here so that the boundary call and every
    # later run are in-process too. A thread pool's work runs in this process already.
    for call in _handoffs(module):
        if _process_pool(module, call):
            for source in _alternatives(module, call):
                if source is not None and gate.consider(_unpooled(source)):
                    return
    for site in _map_sites(module):
        if _process_pool(module, site.call):
            for source in _map_alternatives(module, site):
                if source is not None and gate.consider(_unpooled(source)):
                    return


class _Unpool(cst.CSTTransformer):
    """A process pool nothing uses any more goes: ``with Pool(...) as p: BODY`` → ``BODY``, and
    ``p = Pool(...)`` as a statement of its own. Without it the candidate that brought the work
    home still starts the pool (as many processes, more tokens) and is never run."""

    def __init__(self, reads: dict[str, int]) -> None:
        self.reads = reads

    def _unused(self, call: cst.BaseExpression, name: cst.BaseExpression | None) -> bool:
        return (isinstance(call, cst.Call) and _name(call.func) in _INIT_AT
                and (name is None or isinstance(name, cst.Name) and not self.reads.get(name.value)))

    def leave_With(self, original, updated):
        if len(original.items) == 1 and isinstance(original.body, cst.IndentedBlock):
            item = original.items[0]
            if self._unused(item.item, item.asname.name if item.asname else None):
                return cst.FlattenSentinel(updated.body.body)
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        s = original.body[0] if len(original.body) == 1 else None
        if isinstance(s, cst.Assign) and len(s.targets) == 1 and self._unused(s.value, s.targets[0].target):
            return cst.RemoveFromParent()
        return updated


def _unpooled(source: str) -> str:
    module = parse(source)
    out = safe(lambda: module.visit(_Unpool(census(module).total({Role.READ}))).code)
    return out if out is not None else source


def _process_pool(module: cst.Module, call: cst.Call) -> bool:
    pool = _pool_of(module, call)
    return pool is not None and _name(pool.func) in _INIT_AT
