"""Rewrites that more than one pass family builds its candidates from, and the small checks
they rest on. None of them is a pass: each takes a tree (or a source) and gives the rewritten one,
or an answer about it, and proposes nothing.

- what a rewrite leaves dead: ``drop_dead_code`` (unused definitions and pure assignments, to a
  fixpoint), ``drop_empty_ifs`` (``if cond: pass`` with a harmless condition), ``is_pure``;
- a name's value written where it is read: ``single_bindings`` (names bound once, and to what),
  ``substitute``, ``names_bound_inside``;
- a loop or an iterable as its one step: ``one_step``, ``only_element``, ``first_element``,
  ``one_iteration``;
- a call's arguments: ``parameter_slots`` (which parameter each binds), ``spread_kwargs``,
  ``without_trailing_comma``, ``SIZE_WORDS`` (keywords that give a size).

A family shares a helper with another only through this module (tests/test_import_graph.py: no
module imports another pass module's ``_private`` names). Each tree form (``dead_code_removed``,
``empty_ifs_removed``) takes the ``(module, text)`` of cleanup's bulk chain; its text form
(``drop_dead_code``, ``drop_empty_ifs``) goes from source to source.
"""
from __future__ import annotations

import re

import libcst as cst

from reducer.analysis.cst import StatementTransformer, body_statements, collect, collect_statements, is_literal, parse, render
from reducer.analysis.names import BINDINGS, Census, Role, census, uses


# ---- what a rewrite leaves dead ----------------------------------------------------------------
def chain_root(expr: cst.BaseExpression) -> str | None:
    """The name an attribute/call chain starts from (``logging`` in ``logging.getLogger().info``);
    unlike ``reducer.analysis.cst.root_name``, a subscript ends the chain."""
    while isinstance(expr, (cst.Attribute, cst.Call)):
        expr = expr.value if isinstance(expr, cst.Attribute) else expr.func
    return expr.value if isinstance(expr, cst.Name) else None


def is_string_statement(stmt: cst.CSTNode) -> bool:
    """A statement that is only a string: a docstring, or a string left where a comment would be."""
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def is_pure(expr: cst.BaseExpression) -> bool:
    """Evaluating it has no effect worth keeping: values, names, attribute chains, lambdas."""
    if is_literal(expr) or isinstance(expr, (cst.Name, cst.Lambda)):
        return True
    if isinstance(expr, cst.Attribute):
        return is_pure(expr.value)
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return all(isinstance(e, cst.Element) and is_pure(e.value) for e in expr.elements)
    if isinstance(expr, cst.Dict):
        return all(isinstance(e, cst.DictElement) and is_pure(e.key) and is_pure(e.value) for e in expr.elements)
    if isinstance(expr, cst.Subscript):
        return is_pure(expr.value)
    if isinstance(expr, cst.IfExp):
        return is_pure(expr.test) and is_pure(expr.body) and is_pure(expr.orelse)
    if isinstance(expr, cst.Comparison):
        return is_pure(expr.left) and all(is_pure(c.comparator) for c in expr.comparisons)
    return False


_INERT_DECORATORS = {"dataclass", "staticmethod", "classmethod", "property", "dataclasses"}


def is_dead(stmt: cst.CSTNode, used: dict[str, int]) -> bool:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        if any(chain_root(d.decorator) not in _INERT_DECORATORS for d in stmt.decorators):
            return False
        return used.get(stmt.name.value, 0) == 0
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        s = stmt.body[0]
        if isinstance(s, cst.Assign) and is_pure(s.value):
            return all(isinstance(t.target, cst.Name) and used.get(t.target.value, 0) == 0 for t in s.targets)
        if isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name):
            return (s.value is None or is_pure(s.value)) and used.get(s.target.value, 0) == 0
    return False


def store_only_lines(module: cst.Module, used: dict[str, int]) -> dict[int, str]:
    """``d[k] = v`` lines (pure k and v) of names read nowhere else: once the call that took
    ``device_map`` is given its recorded literal, the lines that built it are dead too."""
    by_name: dict[str, list[cst.CSTNode]] = {}
    for line in collect_statements(module, lambda n: isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1):
        s = line.body[0]
        if not (isinstance(s, cst.Assign) and len(s.targets) == 1 and is_pure(s.value)):
            continue
        t = s.targets[0].target
        if (isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and len(t.slice) == 1
                and isinstance(t.slice[0].slice, cst.Index) and is_pure(t.slice[0].slice.value)):
            by_name.setdefault(t.value.value, []).append(line)
    return {id(line): name for name, lines in by_name.items() if used.get(name, 0) == len(lines) for line in lines}


class _DropDead(StatementTransformer):
    """One round of dead-code removal with the names' uses known (see ``drop_dead_code``)."""

    def __init__(self, used: dict[str, int], stores: dict[int, str]) -> None:
        self.used, self.stores = used, stores
        self.class_depth = 0
        self._saved: list[int] = []
        self.removed = 0

    def _drop(self) -> cst.RemovalSentinel:
        self.removed += 1
        return cst.RemoveFromParent()

    def visit_ClassDef(self, node) -> None:
        self.class_depth += 1

    def leave_ClassDef(self, original, updated):
        self.class_depth -= 1
        return self._drop() if self.class_depth == 0 and is_dead(original, self.used) else updated

    def visit_FunctionDef(self, node) -> None:
        # a function body is a fresh statement list again, even inside a class
        self._saved.append(self.class_depth)
        self.class_depth = 0

    def leave_FunctionDef(self, original, updated):
        self.class_depth = self._saved.pop()
        return self._drop() if self.class_depth == 0 and is_dead(original, self.used) else updated

    def leave_SimpleStatementLine(self, original, updated):
        if self.class_depth == 0 and (is_dead(original, self.used) or id(original) in self.stores):
            return self._drop()
        return updated


def dead_code_round(module: cst.Module) -> tuple[cst.Module, int]:
    """The module with what is dead now removed, and how many statements went."""
    used = uses(module)
    stores = store_only_lines(module, used)
    for name in set(stores.values()):
        used[name] = 0
    t = _DropDead(used, stores)
    return module.visit(t), t.removed


def dead_code_removed(module: cst.Module, text: str = "") -> cst.Module:
    for _ in range(20):
        module, removed = dead_code_round(module)
        if not removed:
            break
    return module


def drop_dead_code(source: str) -> str:
    """Remove unused definitions and pure assignments to unused names, to a fixpoint (one
    removal can make another definition unused). Class bodies are left alone: methods are
    reached implicitly (``model(x)`` calls ``forward``). The rounds work on the tree and render
    once: a round's decisions do not depend on the ``pass`` that rendering puts in an emptied
    block."""
    return render(dead_code_removed(parse(source)))


def _loads(source: str) -> set[str]:
    import ast
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def drop_unread_bindings(before: str, after: str) -> str:
    """``after`` without the assignments to names ``before`` read and ``after`` no longer reads,
    to a fixpoint. A value written out in place of what computed it (a namespace's option, a
    batch the tokenizer made) leaves the object behind it bound by a call (a parser, a tokenizer),
    which is never dead code to ``drop_dead_code``: it may have done something. The candidate is
    smaller only with it gone, and the run says whether what the call did mattered."""
    freed = _loads(before) - _loads(after)
    for _ in range(8):
        module = parse(after)
        unread = freed - _loads(after)
        dead = [line for line in collect(module, lambda n: isinstance(n, cst.SimpleStatementLine))
                if len(line.body) == 1 and isinstance(line.body[0], cst.Assign)
                and all(isinstance(t.target, cst.Name) and t.target.value in unread for t in line.body[0].targets)]
        if not dead:
            return after
        # what the removed statements read may be unread now too
        freed |= {n for line in dead for n in _loads(module.code_for_node(line).strip())}
        after = render(module.visit(_Drop({id(line) for line in dead})))
    return after


class _Drop(cst.CSTTransformer):
    def __init__(self, ids: set[int]) -> None:
        self.ids = ids

    def on_leave(self, original: cst.CSTNode, updated):
        return cst.RemoveFromParent() if id(original) in self.ids else updated


def harmless_test(expr: cst.BaseExpression) -> bool:
    """A condition whose evaluation does nothing worth keeping: names, attributes, literals,
    comparisons and boolean combinations of those (`if key in CACHE:`, `if not ok:`)."""
    if is_pure(expr):
        return True
    if isinstance(expr, cst.Comparison):
        return harmless_test(expr.left) and all(harmless_test(c.comparator) for c in expr.comparisons)
    if isinstance(expr, cst.UnaryOperation):
        return harmless_test(expr.expression)
    if isinstance(expr, cst.BooleanOperation):
        return harmless_test(expr.left) and harmless_test(expr.right)
    return False


class _DropEmptyIfs(StatementTransformer):
    def leave_If(self, original, updated):
        empty = all(isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Pass) for x in s.body)
                    for s in body_statements(updated.body))
        if empty and updated.orelse is None and harmless_test(updated.test):
            return cst.RemoveFromParent()
        return updated


def empty_ifs_removed(module: cst.Module, text: str = "") -> cst.Module:
    return module.visit(_DropEmptyIfs())


def drop_empty_ifs(source: str) -> str:
    """``if cond: pass`` with no else and a harmless condition: what the first cut leaves of a
    branch that was not taken."""
    return render(empty_ifs_removed(parse(source), source))


# ---- a name's value written where it is read --------------------------------------------------
def single_bindings(module: cst.Module, want=is_literal, ignore_params: bool = False, names: Census | None = None
                    ) -> dict[str, tuple[cst.SimpleStatementLine, cst.BaseExpression]]:
    """Names bound exactly once, by a plain ``name = value`` statement whose value satisfies ``want``
    (with ``ignore_params``, function parameters of the same name do not count as bindings).
    ``names``: the module's census, where the caller has taken it already."""
    names = names or census(module)
    counts = names.total(BINDINGS - {Role.PARAM} if ignore_params else BINDINGS)
    out: dict[str, tuple[cst.SimpleStatementLine, cst.BaseExpression]] = {}
    for line in collect(module, lambda n: isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1):
        s = line.body[0]
        if (isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name)
                and counts.get(s.targets[0].target.value) == 1 and want(s.value)):
            out[s.targets[0].target.value] = (line, s.value)
        elif (isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name) and s.value is not None
              and counts.get(s.target.value) == 1 and want(s.value)):
            # `MODEL_PRESETS: dict[str, dict] = {...}`: the annotation says nothing about the bug
            out[s.target.value] = (line, s.value)
    return out


# Expressions that can stand anywhere a name can without parentheses (numbers aside: `1.real`).
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.FormattedString,
          cst.List, cst.Set, cst.Dict, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


_NUMBERS = (cst.Integer, cst.Float, cst.Imaginary)


def names_bound_inside(node: cst.CSTNode) -> set[str]:
    """Names a nested scope of ``node`` (lambda, comprehension, walrus) binds: substituting into
    such a scope could change which binding a name means."""
    out: set[str] = set()
    for n in collect(node, lambda n: isinstance(n, (cst.CompFor, cst.Lambda, cst.NamedExpr))):
        targets = [n.target] if isinstance(n, (cst.CompFor, cst.NamedExpr)) else \
            [p.name for p in n.params.params + n.params.posonly_params + n.params.kwonly_params]
        for t in targets:
            out |= {x.value for x in collect(t, lambda x: isinstance(x, cst.Name))}
    return out


class _Substitute(cst.CSTTransformer):
    """Each read of a name replaced by its value; an attribute's or a keyword's own name is not
    a read and is put back."""

    def __init__(self, values: dict[str, cst.BaseExpression]) -> None:
        self.values = values

    def _unwrapped(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        # A whole argument or element needs no parentheses of its own: `f(a + b)`, not `f((a + b))`.
        if isinstance(original, cst.Name) and original.value in self.values and not self.values[original.value].lpar \
                and not isinstance(self.values[original.value], (cst.Tuple, cst.NamedExpr, cst.Yield)):
            return updated.with_changes(lpar=[], rpar=[])
        return updated

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword, value=self._unwrapped(original.value, updated.value))

    def leave_Element(self, original: cst.Element, updated: cst.Element) -> cst.Element:
        return updated.with_changes(value=self._unwrapped(original.value, updated.value))

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        updated = updated.with_changes(attr=original.attr)
        # `x.real` with x -> 1 must read `(1).real`
        if isinstance(original.value, cst.Name) and original.value.value in self.values \
                and isinstance(updated.value, _NUMBERS) and not updated.value.lpar:
            return updated.with_changes(value=updated.value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        value = self.values.get(original.value)
        if value is None:
            return updated
        if isinstance(value, _ATOMS + _NUMBERS) or value.lpar:
            return value
        return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def substitute(node: cst.CSTNode, values: dict[str, cst.BaseExpression]) -> cst.CSTNode:
    return node.visit(_Substitute(values))


# ---- a loop or an iterable as its one step -----------------------------------------------------
def only_element(iterable: cst.BaseExpression) -> cst.BaseExpression | None:
    """The element of a literal one-element list, tuple or set display."""
    if isinstance(iterable, (cst.List, cst.Tuple, cst.Set)) and len(iterable.elements) == 1 \
            and isinstance(iterable.elements[0], cst.Element):
        return iterable.elements[0].value
    return None


def _dict_view(iterable: cst.BaseExpression) -> cst.BaseExpression | None:
    """The one step of ``{a: b}.items()`` (``a, b``), ``.keys()`` (``a``) or ``.values()`` (``b``)."""
    if not (isinstance(iterable, cst.Call) and not iterable.args and isinstance(iterable.func, cst.Attribute)):
        return None
    view, entries = iterable.func.attr.value, iterable.func.value
    if view not in ("items", "keys", "values") or not isinstance(entries, cst.Dict) or len(entries.elements) != 1 \
            or not isinstance(entries.elements[0], cst.DictElement):
        return None
    e = entries.elements[0]
    return _pair(e.key, e.value) if view == "items" else e.key if view == "keys" else e.value


def one_step(iterable: cst.BaseExpression) -> cst.BaseExpression | None:
    """The one value a loop over ``iterable`` binds its target to, when there is exactly one
    and it can be written down without running anything twice."""
    only = only_element(iterable)
    if only is not None:
        return only
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "enumerate":
        return _enumerated(iterable)
    return _dict_view(iterable)


def _enumerated(call: cst.Call) -> cst.Tuple | None:
    """``(start, a)`` for ``enumerate([a])``, ``enumerate([a], k)``, ``enumerate([a], start=k)``."""
    pos = [a.value for a in call.args if a.keyword is None and not a.star]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if len(pos) + len(keywords) != len(call.args) or set(keywords) - {"start"} \
            or not 1 <= len(pos) <= 2 or len(pos) + len(keywords) > 2:
        return None
    start = pos[1] if len(pos) == 2 else keywords.get("start", cst.Integer("0"))
    element = only_element(pos[0])
    return None if element is None else _pair(start, element)


def _pair(a: cst.BaseExpression, b: cst.BaseExpression) -> cst.Tuple:
    return cst.Tuple([cst.Element(a), cst.Element(b)], lpar=[], rpar=[])


def first_element(iterable: cst.BaseExpression) -> cst.BaseExpression:
    """What a one-step walk over ``iterable`` sees first: a literal's element, ``range``'s start,
    otherwise ``iterable[0]``."""
    only = one_step(iterable)
    if only is not None:
        return only
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range" \
            and iterable.args and not any(a.star or a.keyword for a in iterable.args):
        return iterable.args[0].value if len(iterable.args) > 1 else cst.Integer("0")
    value = iterable
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.List, cst.Tuple)) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Subscript(value, [cst.SubscriptElement(cst.Index(cst.Integer("0")))])


class _LoopControl(cst.CSTTransformer):
    """The loop's own ``break``/``continue`` become ``pass`` (outside a loop they do not compile);
    nested loops and functions keep theirs."""

    def visit_For(self, node) -> bool:
        return False

    def visit_While(self, node) -> bool:
        return False

    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_ClassDef(self, node) -> bool:
        return False

    def leave_Break(self, original, updated):
        return cst.Pass()

    def leave_Continue(self, original, updated):
        return cst.Pass()


def one_iteration(stmts: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """A loop body as straight-line code: its own break/continue can no longer apply."""
    return [s.visit(_LoopControl()) if not isinstance(s, (cst.For, cst.While)) else s for s in stmts]


# ---- a call's arguments -----------------------------------------------------------------------
def parameter_slots(call: cst.Call, fn: cst.FunctionDef) -> list[tuple[cst.Arg, cst.Param]]:
    """Pair each argument of ``call`` with the parameter of ``fn`` it binds (where certain)."""
    positional = list(fn.params.posonly_params) + list(fn.params.params)
    if isinstance(call.func, cst.Attribute) and positional and positional[0].name.value in ("self", "cls"):
        positional = positional[1:]
    by_name = {p.name.value: p for p in positional + list(fn.params.kwonly_params)}
    pairs: list[tuple[cst.Arg, cst.Param]] = []
    i = 0
    for arg in call.args:
        if arg.star:
            return pairs        # after *args/**kw nothing lines up for sure
        if arg.keyword is None:
            if i < len(positional):
                pairs.append((arg, positional[i]))
            i += 1
        elif arg.keyword.value in by_name:
            pairs.append((arg, by_name[arg.keyword.value]))
    return pairs


def without_trailing_comma(items: list) -> list:
    """Keep the list tidy after a deletion: no comma dangling after the new last item."""
    if items and not isinstance(items[-1].comma, cst.MaybeSentinel):
        items = [*items[:-1], items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
    return items


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """``name=value`` as a person writes it, no spaces around the ``=``."""
    return cst.Arg(value, keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))


def spread_kwargs(call: cst.Call, arg: cst.Arg, value: cst.Dict) -> cst.Call:
    """``f(**helper())`` with the recorded ``{'max_memory': {...}}`` → ``f(max_memory={...})``."""
    keys = [e.key.evaluated_value if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
            else None for e in value.elements]
    if not all(isinstance(k, str) and k.isidentifier() for k in keys):
        return call.with_changes(args=[a.with_changes(value=value) if a is arg else a for a in call.args])
    spelled = [keyword_arg(k, e.value) for k, e in zip(keys, value.elements)]
    args: list[cst.Arg] = []
    for a in call.args:
        args.extend(spelled if a is arg else [a])
    args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args[:-1]] + \
        [args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)] if args else []
    return call.with_changes(args=args)


# A keyword that gives a size (layers, widths, vocabulary, shapes): never shrunk to zero
# (passes/literals.py) and, on a config class, never dropped back to the library's full-size
# default (passes/arguments.py).
SIZE_WORDS = re.compile(r"size|dim|num_|^n_|_n$|features|layers|heads|vocab|len|shape|channels|width|height|"
                        r"length|experts|positions|rank|^r$|batch", re.IGNORECASE)
