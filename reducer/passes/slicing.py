"""Backward slice from the failing statement, offered as ONE candidate.

The run that made the current best interesting also says where it failed: the script's own
frames of the matched traceback (``sys.exit(main())`` at the top level, the call inside ``main``,
...). In every statement list on that path, the statement holding a failing frame's line is the
criterion; walking backwards from it, a statement is kept only if it writes a name that a kept
statement reads (assigns it, mutates it through an item, attribute or method call, or passes it to
a call). Everything else in those lists goes, innermost list first, so that a ``def`` at the top
level only keeps the globals its sliced body still reads.

Where delta debugging needs a run per statement (or per run of statements) to learn that the RAG
stub, the request queue and the summary loop do not matter, the slice proposes dropping all of
them at once; a real run still decides. The dependency analysis is by name and deliberately
conservative (any call may mutate its receiver and its arguments), and a statement list inside a
loop is walked twice, so that a value carried from one iteration to the next is kept.
"""
from __future__ import annotations

import libcst as cst

from reducer.analysis.cst import parse_with_positions, render, root_name as _root
from reducer.analysis.names import Role, Roles, binding_target, import_bindings, target_leaves
from reducer.passes.base import Gate

_LOOPS = (cst.For, cst.While)
_CONSTANTS = {"True", "False", "None"}
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
# The occurrences that read a name. `x = ...` binds x without reading it, and so do loops,
# `with`/`except ... as`, comprehensions, parameters and definitions; `x += 1`, `del x`,
# `global x` and a walrus count as reads too (conservative: a read keeps a writer).
_READS = frozenset({Role.READ, Role.AUG_ASSIGN, Role.WALRUS, Role.DEL, Role.GLOBAL, Role.NONLOCAL, Role.MATCH})


class _Effects(cst.CSTVisitor):
    """Names a statement reads and writes, skipping the subtrees already sliced away."""

    def __init__(self, removed: set[int]) -> None:
        self.removed = removed
        self.reads: set[str] = set()
        self.writes: set[str] = set()
        self.loop_exit = False      # holds a break/continue: it decides when a loop ends
        self.for_effect = False
        self._roles = Roles()
        self._depth = 0             # inside a def/class/lambda body: reads only

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.removed:
            return False
        self._roles.decide(node)
        if isinstance(node, cst.SimpleStatementLine):
            self.for_effect = any(isinstance(x, cst.Expr) for x in node.body)
        elif isinstance(node, cst.Name):
            if self._roles.of(node) in _READS:
                self.reads.add(node.value)
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            if self._depth == 0:
                self.writes.add(node.name.value)
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            self.writes.update(n.name.value for n in node.names)
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            self.writes.update(import_bindings(node))
            return False
        if self._depth == 0:
            self._writes_of(node)
        if isinstance(node, _SCOPES):
            self._depth += 1
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        if isinstance(node, _SCOPES):
            self._depth -= 1
        elif isinstance(node, cst.SimpleStatementLine):
            self.for_effect = False     # a compound statement's own test is not a statement

    def _target(self, target: cst.CSTNode) -> None:
        # `x = ...` writes x; `x[k] = ...` and `x.a = ...` change x's object, which counts the same
        self.writes.update(name for name in map(_root, target_leaves(target)) if name)

    def _writes_of(self, node: cst.CSTNode) -> None:
        bound = binding_target(node)
        if bound is not None:
            if bound[1] is not Role.COMPREHENSION:      # a comprehension's variable stays inside it
                self._target(bound[0])
        elif isinstance(node, cst.Call):
            # a method call may change its receiver (`requests.put(r)`, `scored.sort()`); a call
            # made for its effect alone (`get_peft_model(model, cfg)` as a statement) may also
            # change what it is given
            names = [_root(node.func.value) if isinstance(node.func, cst.Attribute) else None]
            if self.for_effect:
                names += [_root(a.value) for a in node.args]
            self.writes.update(n for n in names if n and n not in _CONSTANTS)
        elif isinstance(node, (cst.Break, cst.Continue)):
            self.loop_exit = True


def _effects(stmt: cst.CSTNode, removed: set[int]) -> _Effects:
    v = _Effects(removed)
    stmt.visit(v)
    return v


def _kills(stmt: cst.CSTNode) -> set[str]:
    """Names a statement rebinds outright (`x = ...`): earlier writers of them are not needed."""
    out: set[str] = set()
    if isinstance(stmt, cst.SimpleStatementLine):
        for x in stmt.body:
            if isinstance(x, cst.Assign):
                out.update(t.target.value for t in x.targets if isinstance(t.target, cst.Name))
            elif isinstance(x, cst.AnnAssign) and x.value is not None and isinstance(x.target, cst.Name):
                out.add(x.target.value)
    return out


class _Blocks(cst.CSTVisitor):
    """Statement lists, innermost first, each with whether it runs inside a loop."""

    def __init__(self) -> None:
        self.found: list[tuple[cst.CSTNode, bool]] = []
        self._stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._stack.append(node)
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        self._stack.pop()
        if isinstance(node, (cst.IndentedBlock, cst.Module)):
            in_loop = False
            for outer in reversed(self._stack):
                if isinstance(outer, _LOOPS):
                    in_loop = True
                    break
                if isinstance(outer, (cst.FunctionDef, cst.ClassDef)):
                    break
            self.found.append((node, in_loop))


def _holds(pos, node: cst.CSTNode | None, lines: set[int]) -> bool:
    r = pos.get(node) if node is not None else None
    return r is not None and any(r.start.line <= n <= r.end.line for n in lines)


def _slice(module: cst.Module, pos, lines: set[int]) -> set[int]:
    """Ids of the statements the failure at ``lines`` cannot depend on (by name)."""
    v = _Blocks()
    module.visit(v)
    removed: set[int] = set()
    for block, in_loop in v.found:
        stmts = list(block.body)
        criteria = [s for s in stmts if _holds(pos, s, lines)]
        if not criteria:
            continue
        if all(isinstance(s, (cst.FunctionDef, cst.ClassDef)) for s in criteria):
            # the failure is inside a definition; what ran it is a later statement naming it
            # (a logged traceback stops at the `try`, so the `main()` line is not among the frames)
            names = {s.name.value for s in criteria}
            criteria += [s for s in stmts if id(s) not in {id(c) for c in criteria}
                         and _effects(s, removed).reads & names]
        keep = {id(s) for s in criteria}
        needed: set[str] = set()
        for s in criteria:
            needed |= _effects(s, removed).reads
        last = max(i for i, s in enumerate(stmts) if id(s) in keep)
        # inside a loop a later statement can feed the next iteration: walk the list twice
        order = list(reversed(stmts)) * 2 if in_loop else list(reversed(stmts[:last]))
        for s in order:
            if id(s) in keep:
                continue
            if isinstance(s, cst.SimpleStatementLine) and any(
                    isinstance(x, (cst.Global, cst.Nonlocal)) or
                    (isinstance(x, cst.ImportFrom) and isinstance(x.module, cst.Name) and x.module.value == "__future__")
                    for x in s.body):
                keep.add(id(s))
                continue
            fx = _effects(s, removed)
            if fx.writes & needed or (in_loop and fx.loop_exit):
                keep.add(id(s))
                needed = (needed - _kills(s)) | fx.reads
        removed |= {id(s) for s in stmts if id(s) not in keep}
    return removed


def _path(module: cst.Module, pos, lines: set[int]) -> dict[int, str]:
    """The scaffolding around the failure: id → how to straighten it. A ``while`` becomes one pass
    of its body, a ``try`` its body (and ``finally``), an ``if`` the branch that failed; loops
    over data (``for``) and ``with`` blocks (a ``torch.no_grad()`` matters) stay."""
    found: dict[int, str] = {}

    class _StraightenPath(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if not isinstance(node, cst.Module) and not _holds(pos, node, lines):
                return False
            if isinstance(node, cst.While) and node.orelse is None:
                found[id(node)] = "loop"
            elif isinstance(node, cst.Try) and _holds(pos, node.body, lines):
                found[id(node)] = "try"
            elif isinstance(node, cst.If) and _holds(pos, node.body, lines):
                found[id(node)] = "then"
            elif (isinstance(node, cst.If) and isinstance(node.orelse, cst.Else)
                  and _holds(pos, node.orelse.body, lines)):
                found[id(node)] = "else"
            return True

    module.visit(_StraightenPath())
    return found


def _render(module: cst.Module, removed: set[int], path: dict[int, str]) -> str:
    from reducer.analysis.cst import body_statements, splice
    from reducer.passes.rewrites import one_iteration

    class Cut(cst.CSTTransformer):
        def on_visit(self, node: cst.CSTNode) -> bool:
            return id(node) not in removed

        def on_leave(self, original: cst.CSTNode, updated):
            if id(original) in removed:
                return cst.RemoveFromParent()
            how = path.get(id(original))
            if how == "loop":
                return splice(one_iteration(body_statements(updated.body)), original)
            if how == "try":
                final = body_statements(updated.finalbody.body) if updated.finalbody else []
                return splice(body_statements(updated.body) + final, original)
            if how == "then":
                return splice(body_statements(updated.body), original)
            if how == "else":
                return splice(body_statements(updated.orelse.body), original)
            return updated

    return render(module.visit(Cut()))


def cuts(source: str, lines: set[int]) -> list[str]:
    """Candidates, boldest first: the failing path straightened and sliced, straightened only,
    sliced only."""
    from reducer.passes.rewrites import drop_empty_ifs
    module, pos = parse_with_positions(source)
    removed, path = _slice(module, pos, lines), _path(module, pos, lines)
    out = []
    for r, p in ((removed, path), (set(), path), (removed, {})):
        if r or p:
            text = _render(module, r, p)
            # `if request is None: break` became `...: pass` once its loop went
            out.append(drop_empty_ifs(text) if p else text)
    return out


def sliced(source: str, lines: set[int]) -> str | None:
    """``source`` minus every statement the failure at ``lines`` cannot depend on (by name)."""
    module, pos = parse_with_positions(source)
    removed = _slice(module, pos, lines)
    return _render(module, removed, {}) if removed else None


def slice_failure(gate: Gate) -> None:
    """Offer the cuts boldest first; the first that fails the same way wins (at most three runs
    a round, none when nothing would change).

    Removes: every statement on the failing path's statement lists that writes nothing a kept
    statement reads.
    Never changes: the statement holding a failing frame's line, or any statement that writes a
    name a kept one reads."""
    lines = gate.failure_lines(gate.best)
    if not lines:
        return
    try:
        candidates = cuts(gate.best, set(lines))
    except (cst.ParserSyntaxError, cst.CSTValidationError, ValueError, TypeError, AttributeError, RecursionError):
        return
    for candidate in candidates:
        if candidate != gate.best and gate.consider(candidate):
            return
