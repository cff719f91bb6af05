"""The name analyses: what each name of a script is, and which names it reads that nothing binds.

Two questions, two parsers:

- ``Role`` / ``census`` / ``uses`` (libcst): what each ``cst.Name`` of a script is: a read, a
  binding (and by which form), or no variable at all (an attribute name, a keyword argument's
  name, a part of an imported module's path). Every pass that asks "is this name used, bound,
  loaded here" asks this one classification; they differ only in which roles they count, and
  each says so with a set of roles. ``Roles`` decides the roles as a walk goes, so a pass that
  walks the tree anyway (a transformer, a visitor with checks of its own) classifies in that
  same walk instead of a second one.
- ``unbound_reads`` (Python's ``ast``): which names a script reads that nothing in it binds. The
  judge (reducer/search/judge.py) uses this to refuse, without a run, a candidate that unbinds a name the
  script still reads (deleting ``x = load()`` while ``f(x)`` stays): once the first cut has
  removed the code that never ran, such a candidate almost always dies of a ``NameError`` before
  reaching the failure, and on a GPU that is 10-60 seconds for nothing. The analysis is coarse on
  purpose (one namespace for the whole module): it can only miss a NameError, never invent one
  for a name that is bound anywhere.
"""
from __future__ import annotations

import ast
import builtins
import enum
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

import libcst as cst


class Role(enum.Enum):
    READ = "read"
    # no variable at all
    ATTRIBUTE = "attribute"         # `name` in `obj.name`
    KEYWORD = "keyword"             # `name` in `f(name=...)`
    IMPORTED = "imported"           # `a`, `b` and `c` in `from a.b import c as d`, `b` in `import a.b`
    # bindings, by form
    ASSIGN = "assign"               # the whole target: `x = ...`
    UNPACK = "unpack"               # an item of a destructuring target: `a, *b = ...`
    ANN_ASSIGN = "ann_assign"       # `x: int = ...`
    AUG_ASSIGN = "aug_assign"       # `x += 1` (reads x too)
    FOR = "for"
    COMPREHENSION = "comprehension"
    AS = "as"                       # `with ... as x`, `except E as x`
    IMPORT = "import"               # `d` above, `a` in `import a.b`
    PARAM = "param"
    DEF = "def"
    CLASS = "class"
    WALRUS = "walrus"
    DEL = "del"
    GLOBAL = "global"
    NONLOCAL = "nonlocal"
    MATCH = "match"                 # a capture pattern: `case x:`, `case [*rest]`, `case {**rest}`


NOT_VARIABLES = frozenset({Role.ATTRIBUTE, Role.KEYWORD, Role.IMPORTED})
BINDINGS = frozenset(Role) - NOT_VARIABLES - {Role.READ}


def target_leaves(target: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The parts a target assigns to: ``a``, ``b.c`` and ``d[0]`` in ``a, (b.c, *d[0]) = ...``."""
    if isinstance(target, (cst.Tuple, cst.List)):
        for e in target.elements:
            yield from target_leaves(e.value)
    elif isinstance(target, cst.StarredElement):
        yield from target_leaves(target.value)
    else:
        yield target


def bound_names(target: cst.BaseExpression) -> list[cst.Name]:
    """The names a target binds (an item or attribute target binds none: it reads its root)."""
    return [n for n in target_leaves(target) if isinstance(n, cst.Name)]


def _dotted(expr: cst.BaseExpression | None) -> Iterator[cst.Name]:
    while isinstance(expr, cst.Attribute):
        yield expr.attr
        expr = expr.value
    if isinstance(expr, cst.Name):
        yield expr


def _import_binding(alias: cst.ImportAlias) -> cst.Name:
    """The name an import alias binds: the ``as`` name, else the first part of the dotted name."""
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name
    return list(_dotted(alias.name))[-1]


def bound_name(alias: cst.ImportAlias) -> str:
    return _import_binding(alias).value


def import_bindings(node: cst.Import | cst.ImportFrom) -> list[str]:
    """The names an import statement binds (none for ``*``, which this analysis cannot see)."""
    if isinstance(node.names, cst.ImportStar):
        return []
    return [bound_name(a) for a in node.names]


# Records a role for a name unless one is recorded already: ``dict.setdefault`` on ``id(name)``.
Mark = Callable[[int, Role], Role]


# Each node that binds what its target names: how to reach the target, and the form.
_TARGETS: dict[type, tuple[Callable[[Any], cst.BaseExpression], Role]] = {
    cst.AssignTarget: (lambda n: n.target, Role.ASSIGN),
    cst.AnnAssign: (lambda n: n.target, Role.ANN_ASSIGN),
    cst.AugAssign: (lambda n: n.target, Role.AUG_ASSIGN),
    cst.For: (lambda n: n.target, Role.FOR),
    cst.CompFor: (lambda n: n.target, Role.COMPREHENSION),
    cst.AsName: (lambda n: n.name, Role.AS),
    cst.NamedExpr: (lambda n: n.target, Role.WALRUS),
    cst.Del: (lambda n: n.target, Role.DEL),
}


def binding_target(node: cst.CSTNode) -> tuple[cst.BaseExpression, Role] | None:
    """What ``node`` assigns to (``x`` of ``x = ...``, ``k, v`` of ``for k, v in ...``) and the
    form of binding; None for a node that binds no target."""
    entry = _TARGETS.get(type(node))
    return None if entry is None else (entry[0](node), entry[1])


def _mark_target(node: cst.CSTNode, mark: Mark) -> None:
    target, role = binding_target(node)
    if type(target) is cst.Name:
        mark(id(target), role)
        return
    # the items of a destructuring assignment are told apart from a whole target (see USES)
    for name in bound_names(target):
        mark(id(name), Role.UNPACK if role is Role.ASSIGN else role)


def _mark_import(node: cst.Import | cst.ImportFrom, mark: Mark) -> None:
    if isinstance(node, cst.ImportFrom):
        for name in _dotted(node.module):
            mark(id(name), Role.IMPORTED)
    if isinstance(node.names, cst.ImportStar):
        return
    for alias in node.names:
        mark(id(_import_binding(alias)), Role.IMPORT)
        for name in _dotted(alias.name):
            mark(id(name), Role.IMPORTED)      # no-op for the one already marked as the binding


def _mark_names(items: Sequence[cst.NameItem], role: Role, mark: Mark) -> None:
    for item in items:
        mark(id(item.name), role)


def _mark_optional(node: cst.CSTNode | None, role: Role, mark: Mark) -> None:
    if node is not None:
        mark(id(node), role)


# Each node type that decides the roles of some names below it, and how.
_RULES: dict[type, Callable[[cst.CSTNode, Mark], None]] = {
    cst.Attribute: lambda n, mark: mark(id(n.attr), Role.ATTRIBUTE),
    cst.Arg: lambda n, mark: _mark_optional(n.keyword, Role.KEYWORD, mark),
    cst.Param: lambda n, mark: mark(id(n.name), Role.PARAM),
    cst.FunctionDef: lambda n, mark: mark(id(n.name), Role.DEF),
    cst.ClassDef: lambda n, mark: mark(id(n.name), Role.CLASS),
    **{kind: _mark_target for kind in _TARGETS},
    cst.Global: lambda n, mark: _mark_names(n.names, Role.GLOBAL, mark),
    cst.Nonlocal: lambda n, mark: _mark_names(n.names, Role.NONLOCAL, mark),
    cst.Import: _mark_import,
    cst.ImportFrom: _mark_import,
    cst.MatchAs: lambda n, mark: _mark_optional(n.name, Role.MATCH, mark),
    cst.MatchStar: lambda n, mark: _mark_optional(n.name, Role.MATCH, mark),
    cst.MatchMapping: lambda n, mark: _mark_optional(n.rest, Role.MATCH, mark),
}


class Roles:
    """The roles of the names below the nodes a walk has reached. Call ``decide`` on each node
    before its children (from ``on_visit``); then ``of`` answers for any ``Name`` reached.

    A name's role is decided by the first node that speaks for it, the outermost: inside an
    import, the import's own rule wins over the ``Attribute`` and ``AsName`` rules below it."""

    __slots__ = ("_roles", "_mark")

    def __init__(self) -> None:
        self._roles: dict[int, Role] = {}
        self._mark: Mark = self._roles.setdefault

    def decide(self, node: cst.CSTNode) -> None:
        rule = _RULES.get(type(node))
        if rule is not None:
            rule(node, self._mark)

    def of(self, name: cst.Name) -> Role:
        return self._roles.get(id(name), Role.READ)


class Census(cst.CSTVisitor):
    """One walk that counts each identifier's occurrences by role: ``node.visit(census)``, or
    ``census.on_visit(node)`` from another visitor's ``on_visit``, to share that visitor's walk.

    It looks up no ``visit_*``/``leave_*`` methods: on a script of thousands of lines those
    look-ups, mostly misses, cost more than the counting."""

    def __init__(self) -> None:
        self.roles = Roles()
        self.counts: dict[tuple[str, Role], int] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) is cst.Name:      # not isinstance: libcst's node classes are ABCs, slow to test
            key = (node.value, self.roles.of(node))
            self.counts[key] = self.counts.get(key, 0) + 1
        else:
            self.roles.decide(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass

    def total(self, roles: Collection[Role]) -> dict[str, int]:
        """Occurrences per identifier, counting the given roles only (identifiers with none left out)."""
        out: dict[str, int] = {}
        for (name, role), n in self.counts.items():
            if role in roles:
                out[name] = out.get(name, 0) + n
        return out


def census(node: cst.CSTNode) -> Census:
    c = Census()
    node.visit(c)
    return c


# What keeps a name alive for dead-code and unused-import removal: every occurrence but a plain
# `x = ...` / `x: T = ...`, a def, class, parameter or import binding, a keyword or an import path.
# Coarse on purpose: attribute names count, so nothing reachable as `obj.name` is ever called
# dead, and so do loop, `with ... as`, destructuring and other bindings.
USES = frozenset(Role) - {Role.KEYWORD, Role.IMPORTED, Role.IMPORT, Role.PARAM, Role.DEF, Role.CLASS,
                          Role.ASSIGN, Role.ANN_ASSIGN}


def uses(node: cst.CSTNode) -> dict[str, int]:
    """How often each identifier is used (see ``USES``)."""
    return census(node).total(USES)


def binding_counts(node: cst.CSTNode) -> dict[str, int]:
    """How many places bind each name, in any form (assignment, loop, parameter, import, def...)."""
    return census(node).total(BINDINGS)


# ---- names read and bound nowhere (the gate's check, with ast) -----------------------------
_MODULE_NAMES = {"__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__",
                 "__builtins__", "__path__", "__annotations__", "__dict__", "__class__",
                 "__qualname__", "__module__"}
_KNOWN = set(dir(builtins)) | _MODULE_NAMES


def _bound_by(node: ast.AST) -> list[str]:
    """Names ``node`` binds, whatever the scope (the analysis has one namespace)."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.alias):
        return [node.asname or node.name.split(".")[0]]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    name = getattr(node, "name", None)  # type parameters (3.12+) and the like
    return [name] if isinstance(name, str) and not isinstance(node, ast.alias) else []


def unbound_reads(source: str) -> frozenset[str] | None:
    """Names read somewhere and bound nowhere (builtins aside); None when a star import makes
    the question unanswerable, or the source does not parse. Python's own parser, not libcst:
    the gate asks this of every candidate, and on a script of thousands of lines a libcst walk
    costs a second where ``ast`` costs milliseconds."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    reads: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.add(node.id)
        else:
            bound.update(_bound_by(node))
    return frozenset(reads - bound - _KNOWN)
