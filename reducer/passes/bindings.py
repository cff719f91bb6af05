"""Bindings a person writing a repro by hand would not keep: a name that only carries a value to
its one use, a keyword dictionary built up entry by entry for one ``**`` call, a helper without
parameters that returns one expression, ``Path()`` where the string would do.

- ``fold_kwargs``: ``kw = {}``, ``kw["dtype"] = x``, ``f(**kw)`` → ``f(dtype=x)``.
- ``fold_appends``: ``labels = []``, ``labels.append(x)``, ``labels.append(y)`` → ``labels = [x, y]``
  (at the last append, so nothing an entry reads is used before it is bound).
- ``value_functions``: ``def cfg(): return Config(...)`` called more than once → ``cfg =
  Config(...)`` and each ``cfg()`` → ``cfg``.
- ``attribute_keywords``: ``model.generation_config = GenerationConfig(...)`` then
  ``model.generate(ids)`` → ``model.generate(ids, generation_config=GenerationConfig(...))``.
- ``path_literals``: ``Path()`` → ``"."`` and ``Path("base")`` → ``"base"`` (pathlib's own class).
- ``inline_single_use``: ``lora = LoraConfig()`` … ``get_peft_model(m, lora)`` →
  ``get_peft_model(m, LoraConfig())``, when the one read is later in the same block and not
  inside a loop, function, lambda, class or comprehension there. A read in the very next
  (simple) statement is ``inline_variables``' (reducer/passes/variables.py, a structural pass that
  moves no evaluation past another statement): this pass takes only what that one leaves.

Each of these moves an evaluation (later, or once instead of at every call) or changes a type
(``str`` for ``Path``): none is assumed safe, every candidate is judged by a run, and none may
change the failing call itself other than by spelling the same arguments.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import libcst as cst

from reducer.analysis.cst import assign, collect, parses, replace_many, safe
from reducer.analysis.names import BINDINGS, NOT_VARIABLES, Role, Roles, census
from reducer.passes.base import Gate
from reducer.passes.loops import one_after_another, run_targets, together_then_each
from reducer.passes.rewrites import keyword_arg, spread_kwargs, without_trailing_comma
from reducer.passes.variables import next_statement_bindings

# A read inside one of these runs a different number of times, or at another moment, than the
# statement around it: a value moved there would be evaluated differently.
_DEFERRING = (cst.For, cst.While, cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.ListComp, cst.SetComp,
              cst.DictComp, cst.GeneratorExp)
# Expressions that need no parentheses wherever a name stood.
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.Integer, cst.Float,
          cst.Imaginary, cst.Dict, cst.List, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp, cst.FormattedString)


@dataclass
class _Where:
    node: cst.CSTNode
    stack: list[cst.CSTNode]     # the node's ancestors, outermost first


class _Walk(cst.CSTVisitor):
    """One walk: every read of a name (with its ancestors), and the ancestors of given nodes."""

    def __init__(self, wanted: Iterable[cst.CSTNode] = ()) -> None:
        self.roles = Roles()
        self.stack: list[cst.CSTNode] = []
        self.reads: dict[str, list[_Where]] = {}
        self.wanted = {id(n) for n in wanted}
        self.at: dict[int, _Where] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) is cst.Name:
            if self.roles.of(node) is Role.READ:
                self.reads.setdefault(node.value, []).append(_Where(node, list(self.stack)))
        else:
            self.roles.decide(node)
        if id(node) in self.wanted:
            self.at[id(node)] = _Where(node, list(self.stack))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _block_items(owner: cst.CSTNode) -> Sequence[cst.CSTNode]:
    return owner.body if isinstance(owner, (cst.Module, cst.IndentedBlock)) else ()


def _later_in_block(binding: _Where, use: _Where) -> bool:
    """``use`` sits in a statement after ``binding``'s, in the same block, not deferred."""
    owner = binding.stack[-1] if binding.stack else None
    if owner is None or not any(n is owner for n in use.stack):
        return False
    k = next(i for i, n in enumerate(use.stack) if n is owner)
    if k + 1 >= len(use.stack):
        return False
    items = list(_block_items(owner))
    stmt = use.stack[k + 1]
    i = next((j for j, s in enumerate(items) if s is stmt), None)
    j = next((j for j, s in enumerate(items) if s is binding.node), None)
    if i is None or j is None or i <= j:
        return False
    return not any(isinstance(n, _DEFERRING) for n in use.stack[k + 1:])


def _wrapped(value: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(value, _ATOMS) or value.lpar:
        return value
    return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _single_assign(line: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
        return None
    s = line.body[0]
    if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name):
        return s.targets[0].target.value, s.value
    return None


def _lines(module: cst.Module) -> list[cst.SimpleStatementLine]:
    out: list[cst.SimpleStatementLine] = []

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
            out.append(node)
            return False
    module.visit(V())
    return out


def _keyed(find: Callable[[cst.Module], Sequence[tuple]], build: Callable[[cst.Module, tuple], str | None]):
    """``run_targets``' two functions from one finder of ``(node, ...)`` tuples: the nodes, and
    for a node the candidate ``build`` makes of its tuple."""
    def nodes(module: cst.Module) -> list[cst.CSTNode]:
        return [t[0] for t in find(module)]

    def alternatives(module: cst.Module, node: cst.CSTNode) -> Iterable[str | None]:
        for t in find(module):
            if t[0] is node:
                yield build(module, t)
    return nodes, alternatives


# ---- inline_single_use ---------------------------------------------------------------------------
def _single_use(module: cst.Module) -> list[tuple[cst.SimpleStatementLine, cst.BaseExpression, cst.Name]]:
    """(binding line, its value, the one read) for each name bound once and read once after it,
    except where ``inline_variables`` takes it (the read in the next statement)."""
    bound = census(module).total(BINDINGS)
    theirs = {id(line) for line in next_statement_bindings(module)}
    lines = [(line, got) for line in _lines(module) if (got := _single_assign(line)) is not None
             and bound.get(got[0]) == 1 and id(line) not in theirs]
    walk = _Walk(line for line, _ in lines)
    module.visit(walk)
    out = []
    for line, (name, value) in lines:
        reads = walk.reads.get(name, [])
        if len(reads) == 1 and _later_in_block(walk.at[id(line)], reads[0]):
            out.append((line, value, reads[0].node))
    return out


def _inline_one(module: cst.Module, target) -> str | None:
    line, value, read = target
    return safe(lambda: replace_many(module, [(line, cst.RemoveFromParent()), (read, _wrapped(value))]))


def inlined_all(source: str, limit: int = 64) -> str | None:
    """Every single-use binding inlined, one after another (a value may hold another's read)."""
    def first(m: cst.Module) -> str | None:
        targets = _single_use(m)
        nxt = _inline_one(m, targets[0]) if targets else None
        return nxt if nxt is not None and parses(nxt) else None
    return one_after_another(source, first, limit)


_single_use_nodes, _single_use_alternatives = _keyed(_single_use, _inline_one)


def inline_single_use(gate: Gate) -> None:
    """Every single-use binding at once first (one run), then one by one.

    Removes: ``x = value`` whose one read comes later in the same block, the value moved there.
    Never changes: a read inside a loop, function, lambda, class or comprehension, a name bound or
    read twice; a read in the next statement that ``inline_variables`` takes."""
    together_then_each(gate, _single_use_nodes, _single_use_alternatives, lambda m: inlined_all(m.code))


# ---- fold_kwargs ---------------------------------------------------------------------------------
def _key_assign(line: cst.CSTNode, name: str) -> tuple[str, cst.BaseExpression] | None:
    """``name["key"] = value`` → (key, value)."""
    if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
        return None
    s = line.body[0]
    if not (isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Subscript)):
        return None
    sub = s.targets[0].target
    if not (isinstance(sub.value, cst.Name) and sub.value.value == name and len(sub.slice) == 1):
        return None
    index = sub.slice[0].slice
    if not (isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString)):
        return None
    key = index.value.evaluated_value
    return (key, s.value) if isinstance(key, str) and key.isidentifier() else None


def _initial_entries(value: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]] | None:
    """``{}``, ``{"a": x}`` or ``dict(a=x)`` as (key, value) pairs; None for anything else."""
    if isinstance(value, cst.Dict):
        out = []
        for e in value.elements:
            if not (isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)):
                return None
            key = e.key.evaluated_value
            if not (isinstance(key, str) and key.isidentifier()):
                return None
            out.append((key, e.value))
        return out
    if (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict"
            and all(a.keyword is not None and not a.star for a in value.args)):
        return [(a.keyword.value, a.value) for a in value.args]
    return None


@dataclass
class _Fold:
    lines: list[cst.CSTNode]          # the binding and the key assignments, to remove
    call: cst.Call
    arg: cst.Arg
    entries: list[tuple[str, cst.BaseExpression]]


def _occurrences(node: cst.CSTNode, name: str) -> int:
    return census(node).total(_VARIABLE_ROLES).get(name, 0)


_VARIABLE_ROLES = frozenset(Role) - NOT_VARIABLES


def _fold_at(items: Sequence[cst.CSTNode], j: int, name: str, value: cst.BaseExpression,
             calls: list[cst.Call]) -> _Fold | None:
    """The fold of the dictionary bound at ``items[j]``: its key assignments after it in the same
    block, then one statement that spreads it with ``**`` into a call. Between them the name
    occurs nowhere else, and after that call only a new binding of it may (a helper inlined
    twice leaves two ``kwargs = {}``)."""
    entries = dict(_initial_entries(value) or [])
    removed: list[cst.CSTNode] = [items[j]]
    for k in range(j + 1, len(items)):
        s = items[k]
        got = _key_assign(s, name)
        if got is not None:
            entries[got[0]] = got[1]        # a later assignment of a key wins, in its first place
            removed.append(s)
            continue
        n = _occurrences(s, name)
        if n == 0:
            continue                        # other statements between stay where they are
        arg = _spread_arg(s, name, calls) if n == 1 else None
        if arg is None:
            return None
        after = next((t for t in items[k + 1:] if _occurrences(t, name)), None)
        rebound = after is None or (_single_assign(after) or ("",))[0] == name and _occurrences(after, name) == 1
        return _Fold(removed, arg[0], arg[1], list(entries.items())) if rebound else None
    return None


def _spread_arg(stmt: cst.CSTNode, name: str, calls: list[cst.Call]) -> tuple[cst.Call, cst.Arg] | None:
    """The call in ``stmt`` (not deferred inside it) that has ``**name`` as an argument."""
    walk = _Walk()
    stmt.visit(walk)
    reads = walk.reads.get(name, [])
    if len(reads) != 1 or any(isinstance(n, _DEFERRING) for n in reads[0].stack):
        return None
    for call in calls:
        arg = next((a for a in call.args if a.star == "**" and a.value is reads[0].node), None)
        if arg is not None:
            return call, arg
    return None


def _folds(module: cst.Module) -> list[_Fold]:
    lines = [(line, got) for line in _lines(module) if (got := _single_assign(line)) is not None
             and _initial_entries(got[1]) is not None]
    if not lines:
        return []
    walk = _Walk(line for line, _ in lines)
    module.visit(walk)
    calls = _calls(module)
    out = []
    for line, (name, value) in lines:
        where = walk.at[id(line)]
        items = list(_block_items(where.stack[-1])) if where.stack else []
        j = next((i for i, s in enumerate(items) if s is line), None)
        fold = None if j is None else _fold_at(items, j, name, value, calls)
        if fold is not None:
            out.append(fold)
    return out


def _calls(module: cst.Module) -> list[cst.Call]:
    found: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)
    module.visit(V())
    return found


def _folded(module: cst.Module, fold: _Fold) -> str | None:
    display = cst.Dict([cst.DictElement(cst.SimpleString(repr(k)), v) for k, v in fold.entries])
    call = spread_kwargs(fold.call, fold.arg, display)
    pairs: list[tuple[cst.CSTNode, object]] = [(s, cst.RemoveFromParent()) for s in fold.lines]
    out = safe(lambda: replace_many(module, [*pairs, (fold.call, call)]))
    return out if out is not None and parses(out) else None


_fold_nodes, _fold_alternatives = _keyed(lambda m: [(f.lines[0], f) for f in _folds(m)], lambda m, t: _folded(m, t[1]))


def fold_kwargs(gate: Gate) -> None:
    """A keyword dictionary built for one ``**`` call becomes that call's keywords.

    Removes: ``kw = {}`` and its ``kw["key"] = value`` statements.
    Never changes: a dict read anywhere else, filled conditionally, or with keys that are not
    identifiers."""
    run_targets(gate, _fold_nodes, _fold_alternatives)


# ---- fold_appends --------------------------------------------------------------------------------
def _list_display(value: cst.BaseExpression) -> list[cst.BaseElement] | None:
    """``[]``, ``[a, b]`` or ``list()``: the elements; None for anything else."""
    if isinstance(value, cst.List):
        return list(value.elements)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "list" and not value.args:
        return []
    return None


def _appended(line: cst.CSTNode, name: str) -> list[cst.BaseElement] | None:
    """``name.append(v)``, ``name.extend([..])`` or ``name += [..]`` as the elements it adds."""
    if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
        return None
    s = line.body[0]
    if (isinstance(s, cst.AugAssign) and isinstance(s.operator, cst.AddAssign) and isinstance(s.target, cst.Name)
            and s.target.value == name):
        return _list_display(s.value)
    if not (isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)):
        return None
    call = s.value
    f = call.func
    if not (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == name
            and len(call.args) == 1 and not call.args[0].star and call.args[0].keyword is None):
        return None
    if f.attr.value == "append":
        return [cst.Element(call.args[0].value)]
    if f.attr.value == "extend":
        return _list_display(call.args[0].value)
    return None


def _appends(module: cst.Module) -> list[tuple[cst.CSTNode, list[cst.CSTNode], list[cst.BaseElement]]]:
    """Each list bound empty or as a display, with the appends to it later in its block before any
    other use of the name: (binding, the appends, every element in order)."""
    lines = [(line, got) for line in _lines(module) if (got := _single_assign(line)) is not None
             and _list_display(got[1]) is not None]
    if not lines:
        return []
    walk = _Walk(line for line, _ in lines)
    module.visit(walk)
    out = []
    for line, (name, value) in lines:
        where = walk.at[id(line)]
        items = list(_block_items(where.stack[-1])) if where.stack else []
        j = next((i for i, s in enumerate(items) if s is line), None)
        if j is None:
            continue
        elements, folded = list(_list_display(value) or []), []
        for s in items[j + 1:]:
            got = _appended(s, name)
            if got is not None and _occurrences(s, name) == 1:     # the value itself does not read the list
                elements += got
                folded.append(s)
            elif _occurrences(s, name):
                break                       # read or rebound: the list is complete from here on
        if folded:
            out.append((line, folded, elements))
    return out


def _appends_folded(module: cst.Module, found) -> str | None:
    line, folded, elements = found
    name = _single_assign(line)[0]
    elements = [e.with_changes(comma=cst.MaybeSentinel.DEFAULT) for e in elements]
    last = folded[-1]
    pairs: list[tuple[cst.CSTNode, object]] = [(s, cst.RemoveFromParent()) for s in [line, *folded[:-1]]]
    pairs.append((last, assign(name, cst.List(elements)).with_changes(leading_lines=last.leading_lines)))
    out = safe(lambda: replace_many(module, pairs))
    return out if out is not None and parses(out) else None


_append_nodes, _append_alternatives = _keyed(_appends, _appends_folded)


def fold_appends(gate: Gate) -> None:
    """A list filled by appends right after it is bound becomes one display, bound at the last
    append (the entries' own names are bound by then).

    Removes: ``x = []`` and its ``x.append(v)`` / ``x.extend([..])`` / ``x += [..]`` statements
    but the last, which becomes ``x = [..]``.
    Never changes: an append inside a loop, a branch or another block (a different count), an
    ``extend`` of anything but a list display, a list read or rebound between its appends."""
    run_targets(gate, _append_nodes, _append_alternatives)


# ---- value_functions -----------------------------------------------------------------------------
def _returns_one_expression(fn: cst.FunctionDef) -> cst.BaseExpression | None:
    p = fn.params
    if (fn.decorators or fn.asynchronous is not None or p.params or p.posonly_params or p.kwonly_params
            or not isinstance(p.star_arg, cst.MaybeSentinel) or p.star_kwarg is not None):
        return None
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ()
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    ret = body[0].body[0]
    return ret.value if isinstance(ret, cst.Return) and ret.value is not None else None


def _value_functions(module: cst.Module) -> list[tuple[cst.FunctionDef, cst.BaseExpression, list[cst.Call]]]:
    fns = [(fn, v) for fn in _defs(module) if (v := _returns_one_expression(fn)) is not None]
    if not fns:
        return []
    walk = _Walk(fn for fn, _ in fns)
    module.visit(walk)
    bound = census(module).total(BINDINGS)
    out = []
    for fn, value in fns:
        name = fn.name.value
        reads = walk.reads.get(name, [])
        if bound.get(name) != 1 or len(reads) < 2:
            continue        # one call: inline_functions' job
        calls = []
        for r in reads:
            parent = r.stack[-1] if r.stack else None
            if not (isinstance(parent, cst.Call) and parent.func is r.node and not parent.args):
                break
            calls.append(parent)
        else:
            out.append((fn, value, calls))
    return out


def _defs(module: cst.Module) -> list[cst.FunctionDef]:
    found: list[cst.FunctionDef] = []

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            found.append(node)
    module.visit(V())
    return found


def _as_value(module: cst.Module, target) -> str | None:
    fn, value, calls = target
    name = fn.name.value
    pairs = [(fn, assign(name, value).with_changes(leading_lines=fn.leading_lines))]
    pairs += [(c, cst.Name(name)) for c in calls]
    out = safe(lambda: replace_many(module, pairs))
    return out if out is not None and parses(out) else None


_value_function_nodes, _value_function_alternatives = _keyed(_value_functions, _as_value)


def value_functions(gate: Gate) -> None:
    """A helper without parameters that returns one expression, called more than once, becomes a
    value computed once where it was defined.

    Removes: the ``def`` and the calls' parentheses.
    Never changes: a helper with parameters, decorators or more than its return, or one read other
    than by a call."""
    run_targets(gate, _value_function_nodes, _value_function_alternatives)


# ---- path_literals -------------------------------------------------------------------------------
_PATH_CLASSES = {"Path", "PurePath", "PosixPath", "PurePosixPath"}


def _pathlib_names(module: cst.Module) -> tuple[set[str], set[str]]:
    """Names bound to pathlib's classes (``from pathlib import Path``) and to the module itself."""
    classes: set[str] = set()
    modules: set[str] = set()
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for s in stmt.body:
            if isinstance(s, cst.ImportFrom) and isinstance(s.module, cst.Name) and s.module.value == "pathlib" \
                    and not isinstance(s.names, cst.ImportStar):
                for a in s.names:
                    if isinstance(a.name, cst.Name) and a.name.value in _PATH_CLASSES:
                        classes.add(a.asname.name.value if a.asname else a.name.value)
            elif isinstance(s, cst.Import):
                for a in s.names:
                    if isinstance(a.name, cst.Name) and a.name.value == "pathlib":
                        modules.add(a.asname.name.value if a.asname else "pathlib")
    return classes, modules


def _path_calls(module: cst.Module) -> list[tuple[cst.Call, cst.BaseExpression]]:
    classes, modules = _pathlib_names(module)
    if not classes and not modules:
        return []
    out = []
    for call in _calls(module):
        f = call.func
        named = (isinstance(f, cst.Name) and f.value in classes) or (
            isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value in modules
            and f.attr.value in _PATH_CLASSES)
        if not named:
            continue
        if not call.args:
            out.append((call, cst.SimpleString('"."')))
        elif len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star \
                and isinstance(call.args[0].value, cst.SimpleString):
            out.append((call, call.args[0].value))
    return out


_path_nodes, _path_alternatives = _keyed(_path_calls, lambda m, t: safe(lambda: replace_many(m, [t])))


def _all_paths(module: cst.Module) -> str | None:
    pairs = _path_calls(module)
    return safe(lambda: replace_many(module, list(pairs))) if pairs else None


def path_literals(gate: Gate) -> None:
    """Every pathlib call at once first, then one by one.

    Removes: ``Path()`` (→ ``"."``) and ``Path("base")`` (→ ``"base"``), and with the last of them
    the pathlib import.
    Never changes: a path built from a variable, or a class of that name not imported from pathlib."""
    together_then_each(gate, _path_nodes, _path_alternatives, _all_paths)


# ---- attribute_keywords --------------------------------------------------------------------------
def _attribute_settings(module: cst.Module) -> list[tuple[cst.SimpleStatementLine, str, str, cst.BaseExpression,
                                                          cst.Call]]:
    """``obj.attr = value`` (a statement of its own) followed, later in the same block, by a call
    of one of ``obj``'s methods that has no ``attr=`` keyword, ``obj`` not bound again between:
    (the statement, obj, attr, value, that call)."""
    out = []
    for block in collect(module, lambda n: isinstance(n, (cst.Module, cst.IndentedBlock))):
        body = list(block.body)
        for i, stmt in enumerate(body):
            if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                    and isinstance(stmt.body[0], cst.Assign) and len(stmt.body[0].targets) == 1):
                continue
            target = stmt.body[0].targets[0].target
            if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)):
                continue
            obj, attr = target.value.value, target.attr.value
            for later in body[i + 1:]:
                if census(later).total(BINDINGS).get(obj):
                    break
                calls = collect(later, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                                and isinstance(n.func.value, cst.Name) and n.func.value.value == obj)
                if calls:
                    call = calls[0]
                    if not any(a.keyword is not None and a.keyword.value == attr for a in call.args) \
                            and not any(a.star == "**" for a in call.args):
                        out.append((stmt, obj, attr, stmt.body[0].value, call))
                    break
    return out


def _as_keyword(module: cst.Module, found) -> str | None:
    stmt, _obj, attr, value, call = found
    args = without_trailing_comma(list(call.args))
    new_call = call.with_changes(args=[*args, keyword_arg(attr, value)])
    return replace_many(module, [(stmt, cst.RemovalSentinel.REMOVE), (call, new_call)])


def attribute_keywords(gate: Gate) -> None:
    """A setting put on an object just before one of its methods is called goes into that call as
    the keyword of the same name: ``model.generation_config = GenerationConfig(...)`` then
    ``model.generate(ids)`` → ``model.generate(ids, generation_config=GenerationConfig(...))``,
    what a person writes (the model then needs no name of its own: inline_variables folds it).
    Whether the method takes that keyword and reads it as the attribute is the run's to say.

    Removes: the attribute's assignment.
    Never changes: a call that already has the keyword or takes ``**`` keywords, an object bound
    again in between."""
    run_targets(gate, _attribute_settings, lambda module, found: [_as_keyword(module, found)])
