"""The one name analysis (reducer/analysis/names.py) against the five analyses it stands for.

Those are kept here only, as references: `_Uses` (cleanup), `binding_counts`
(constants), `_bound_names` and the read/skip rules of `_Effects` (slicing), and the skip rules
of `_Inline` and of the constant folder (constants). Each new helper must give exactly what its
reference gave, on generated scripts full of binding forms and on real files, except where a
reference had a bug: those differences are allowed for by name below, with a test of their own.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reducer.analysis import names as _names
from reducer.analysis.cst import collect
from reducer.analysis.names import Role, bound_names, binding_counts, uses
from reducer.passes import constants, slicing
from tests.test_properties import PROGRAMS, sampled_real

ROOT = Path(__file__).resolve().parents[1]


# ---- the references ------------------------------------------------------------------------
class _OldUses(cst.CSTVisitor):
    def __init__(self) -> None:
        self.uses: dict[str, int] = {}
        self._binding: set[int] = set()

    def _bind(self, node: cst.CSTNode | None) -> None:
        if isinstance(node, cst.Name):
            self._binding.add(id(node))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._bind(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bind(node.name)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._bind(node.name)

    def visit_Param(self, node: cst.Param) -> None:
        self._bind(node.name)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._binding.add(id(node.keyword))

    def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self._binding:
            self.uses[node.value] = self.uses.get(node.value, 0) + 1


def old_uses(node: cst.CSTNode) -> dict[str, int]:
    v = _OldUses()
    node.visit(v)
    return v.uses


def old_binding_counts(module: cst.CSTNode) -> dict[str, int]:
    counts: dict[str, int] = {}

    def add(node: cst.CSTNode | None) -> None:
        if isinstance(node, cst.Name):
            counts[node.value] = counts.get(node.value, 0) + 1
        elif isinstance(node, (cst.Tuple, cst.List)):
            for e in node.elements:
                add(e.value)
        elif isinstance(node, cst.StarredElement):
            add(node.value)

    class _CountBindings(cst.CSTVisitor):
        def visit_AssignTarget(self, n): add(n.target)
        def visit_AnnAssign(self, n): add(n.target)
        def visit_AugAssign(self, n): add(n.target)
        def visit_For(self, n): add(n.target)
        def visit_CompFor(self, n): add(n.target)
        def visit_AsName(self, n): add(n.name)
        def visit_Param(self, n): add(n.name)
        def visit_FunctionDef(self, n): add(n.name)
        def visit_ClassDef(self, n): add(n.name)
        def visit_NamedExpr(self, n): add(n.target)
        def visit_Del(self, n): add(n.target)
        def visit_Global(self, n): [add(x.name) for x in n.names]
        def visit_Nonlocal(self, n): [add(x.name) for x in n.names]

        def visit_ImportAlias(self, n):
            if n.asname is None:
                name = n.name
                while isinstance(name, cst.Attribute):
                    name = name.value
                add(name)

    module.visit(_CountBindings())
    return counts


def old_bound_names(target: cst.CSTNode) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in old_bound_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return old_bound_names(target.value)
    return []


class _OldEffects(slicing._Effects):
    """slicing's `_Effects` with the reference's read, skip and target-write rules."""

    def __init__(self, removed: set[int]) -> None:
        super().__init__(removed)
        self._skip: set[int] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.removed:
            return False
        if isinstance(node, cst.SimpleStatementLine):
            self.for_effect = any(isinstance(x, cst.Expr) for x in node.body)
        if isinstance(node, cst.Attribute):
            self._skip.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            self._skip.add(id(node.keyword))
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self._skip.add(id(node.name))
            if self._depth == 0:
                self.writes.add(node.name.value)
        elif isinstance(node, cst.Param):
            self._skip.add(id(node.name))
        elif isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.For, cst.CompFor, cst.AsName)):
            target = node.name if isinstance(node, cst.AsName) else node.target
            for name in old_bound_names(target):
                self._skip.add(id(name))
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            self.writes.update(n.name.value for n in node.names)
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            if not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    name = alias.asname.name if alias.asname is not None else alias.name
                    self.writes.add(slicing._root(name) or "")
            return False
        elif isinstance(node, cst.Name) and id(node) not in self._skip:
            self.reads.add(node.value)
        if self._depth == 0:
            self._writes_of(node)
        if isinstance(node, slicing._SCOPES):
            self._depth += 1
        return True

    def _writes_of(self, node: cst.CSTNode) -> None:
        if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr, cst.Del)):
            self._target(node.target)
        elif isinstance(node, cst.AsName):
            self._target(node.name)
        elif isinstance(node, (cst.Call, cst.Break, cst.Continue)):
            super()._writes_of(node)      # rules that stayed in slicing

    def _target(self, target: cst.CSTNode) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self._target(e.value)
        elif isinstance(target, cst.StarredElement):
            self._target(target.value)
        else:
            name = slicing._root(target)
            if name:
                self.writes.add(name)


class _OldSkips:
    """The reference skip rules of `_Inline` (attribute, keyword, parameter, def and class names
    are no loads; every other name it reaches is) and, with ``definitions=False``, of the
    constant folder (attribute and keyword names only), in the shape of ``Roles``, so that the
    passes' own walks can run with them."""

    def __init__(self, definitions: bool) -> None:
        self.definitions = definitions
        self.skip: set[int] = set()

    def decide(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Attribute):
            self.skip.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            self.skip.add(id(node.keyword))
        elif self.definitions and isinstance(node, (cst.Param, cst.FunctionDef, cst.ClassDef)):
            self.skip.add(id(node.name))

    def of(self, name: cst.Name) -> Role:
        return Role.ATTRIBUTE if id(name) in self.skip else Role.READ


# ---- scripts full of binding forms ---------------------------------------------------------
# few names, so that a binding, a read, an attribute and a keyword of one name meet often
N = st.sampled_from(["a", "b", "c", "d"])
E = st.one_of(N, st.sampled_from(["1", "'s'", "None"]), st.tuples(N, N).map(lambda t: f"{t[0]}.{t[1]}"),
              st.tuples(N, N, N).map(lambda t: f"{t[0]}({t[1]}={t[2]})"),
              st.tuples(N, N).map(lambda t: f"{t[0]}[{t[1]}]"))
FORMS = [
    "{a} = {e}", "{a}, *{b} = {e}", "[{a}, ({b}, {c})] = {e}", "{a}.{b} = {e}", "{a}[{b}] = {e}",
    "{a} = {b} = {e}", "{a}: int = {e}", "{a}: int", "{a} += {e}", "{a}.{b} += 1", "del {a}, {b}[0]",
    "for {a}, {b} in {e}:\n    {c}({a})", "with {e} as {a}, {e} as ({b}, {c}):\n    pass",
    "try:\n    pass\nexcept {a} as {b}:\n    {b}", "print([{a} for {a}, {b} in {e} if {b}])",
    "{a} = ({b} := {e})", "{a} = lambda {b}, *{c}, {d}=1: {b}", "{a}({b}={c}, *{d})",
    "import {a}.{b} as {c}", "import {a}.{b}", "import {a}, {b}", "from .{a} import {b} as {c}, {d}",
    "from {a}.{b} import {c}", "from . import {a}", "from {a} import *",
    "def {a}({b}, /, {c}=1, *, {d}: int = {e}, **kw):\n    global {a}\n    return {b}",
    "def {a}():\n    {b} = 1\n    def {c}():\n        nonlocal {b}\n        {b} += 1\n    return {c}",
    "@{a}.{b}\nclass {c}({d}, metaclass={a}):\n    {b} = {e}\n    def {d}(self):\n        return self.{b}",
    "if {e}:\n    {a} = {b}\nelse:\n    {b}.{c}()",
    "match {e}:\n    case [{a}, *{b}]:\n        pass\n    case {{'k': {c}, **{d}}}:\n        pass\n"
    "    case {a}.{b}({c}=1) as {d}:\n        pass",
]
FORM = st.tuples(st.sampled_from(FORMS), N, N, N, N, E).map(
    lambda t: t[0].format(a=t[1], b=t[2], c=t[3], d=t[4], e=t[5]))
BINDING_PROGRAMS = st.lists(FORM, min_size=1, max_size=8).map(lambda fs: "\n".join(fs) + "\n")
SOURCES = st.one_of(BINDING_PROGRAMS, PROGRAMS, sampled_real())

# the scripts the reducer is benchmarked on and shown with, and its own passes (dense in forms)
REAL = sorted({*(ROOT / "bench" / "corpus").glob("*.py"), *(ROOT / "examples").rglob("*.py"),
               *(ROOT / "tests" / "data" / "reducer").glob("*.py"), *(ROOT / "reducer" / "passes").glob("*.py")})


def _match_captures(node: cst.CSTNode) -> dict[str, int]:
    """Names a match statement's patterns capture: bindings the reference `binding_counts` does not count."""
    out: dict[str, int] = {}
    for n in collect(node, lambda n: isinstance(n, (cst.MatchAs, cst.MatchStar, cst.MatchMapping))):
        name = n.rest if isinstance(n, cst.MatchMapping) else n.name
        if name is not None:
            out[name.value] = out.get(name.value, 0) + 1
    return out


def _added(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in a.keys() | b.keys()}


def _picked(salt: str, node: cst.CSTNode) -> bool:
    return hashlib.sha1(f"{salt}:{cst.Module([]).code_for_node(node)}".encode()).digest()[0] % 4 == 0


def _effects(cls: type, stmt: cst.CSTNode, removed: set[int]) -> tuple:
    v = cls(removed)
    stmt.visit(v)
    return v.reads, v.writes, v.loop_exit


def _check_counts(module: cst.Module) -> None:
    scopes = [module] + [f.body for f in collect(module, lambda n: isinstance(n, cst.FunctionDef))]
    for node in scopes:
        assert uses(node) == old_uses(node)
        expected = _added(old_binding_counts(node), _match_captures(node))
        assert binding_counts(node) == expected
        # the reference single_bindings(ignore_params=True) takes one off per parameter of the name
        params: dict[str, int] = {}
        for p in collect(node, lambda n: isinstance(n, cst.Param)):
            params[p.name.value] = params.get(p.name.value, 0) - 1
        assert _names.census(node).total(_names.BINDINGS - {Role.PARAM}) == {
            k: n for k, n in _added(expected, params).items() if n}


def _check_targets(module: cst.Module) -> None:
    targets = [n.target for n in collect(module, lambda n: isinstance(n, (
        cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Del)))]
    targets += [n.name for n in collect(module, lambda n: isinstance(n, cst.AsName))]
    for t in targets:
        assert [id(n) for n in bound_names(t)] == [id(n) for n in old_bound_names(t)]


def _check_effects(module: cst.Module, salt: str) -> None:
    stmts = collect(module, lambda n: isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement)))
    removed = {id(s) for s in stmts if _picked(salt, s)}
    for s in stmts:
        for gone in (set(), removed - {id(s)}):
            assert _effects(slicing._Effects, s, gone) == _effects(_OldEffects, s, gone)


def _check_inline(module: cst.Module, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, (line, value) in constants.single_bindings(module).items():
        new = constants.inline_name(module, name, line, value)
        with monkeypatch.context() as m:
            m.setattr(constants, "Roles", lambda: _OldSkips(definitions=True))
            assert new == constants.inline_name(module, name, line, value)


def _check_folds(module: cst.Module, monkeypatch: pytest.MonkeyPatch) -> None:
    def spelled(pairs: list[tuple[cst.CSTNode, cst.CSTNode]]) -> list[tuple[int, str]]:
        return [(id(node), module.code_for_node(new)) for node, new in pairs]
    new = constants._folds(module)
    with monkeypatch.context() as m:
        m.setattr(constants, "Roles", lambda: _OldSkips(definitions=False))
        old = constants._folds(module)
    # the reference folder puts the value in place of the target of `N: int = 5` (see below)
    annotated = {id(n.target) for n in collect(module, lambda n: isinstance(n, cst.AnnAssign))}
    assert spelled(new) == spelled([p for p in old if id(p[0]) not in annotated])


def _check_all(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return
    _check_counts(module)
    _check_targets(module)
    _check_effects(module, source[:40])
    _check_inline(module, monkeypatch)
    _check_folds(module, monkeypatch)


@settings(max_examples=300, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(source=SOURCES)
def test_names_agree_with_the_references_on_generated_scripts(source: str, monkeypatch) -> None:
    _check_all(source, monkeypatch)


@pytest.mark.parametrize("path", REAL, ids=lambda p: str(p.relative_to(ROOT)))
def test_names_agree_with_the_references_on_real_files(path: Path, monkeypatch) -> None:
    _check_all(path.read_text(encoding="utf-8"), monkeypatch)


# ---- where a reference was wrong -----------------------------------------------------------
def test_an_annotated_constant_is_folded_into_its_reads_not_its_target() -> None:
    # a folder that replaces the target too writes `5: int = 5`, which does not parse, and so
    # folds nothing in the whole script
    assert constants.folded("N: int = 5\nM = 2\nprint(N, M)\n") == "print(5, 2)\n"


def test_a_match_capture_is_a_binding() -> None:
    # a count without captures makes `N` look bound once, and inlining turns the capture into
    # the value pattern `case 5:`
    source = "N = 5\nmatch x:\n    case N:\n        pass\nprint(N)\n"
    assert binding_counts(cst.parse_module(source)) == {"N": 2}
    assert "N" not in constants.single_bindings(cst.parse_module(source))


def test_a_comment_inside_a_parenthesised_import_is_a_clean_up() -> None:
    # a clean-up walk that stops at `from ... import (` never sees the comment that
    # strip_comments_and_docstrings removes, and then skips bulk clean-up
    from reducer.passes.cleanup import BULK, _apply, could_clean
    source = "from os import (path,  # why\n    sep)\nf(path, sep)\n"
    assert _apply(source, BULK) == "from os import (path,\n    sep)\nf(path, sep)\n"
    assert could_clean(source)


def test_roles_by_form() -> None:
    source = ("import a.b as c\nfrom .d import e as f, g\nh, *i = j.k\nfor l in m(n=o): pass\n"
              "def p(q, *, r=s): global t; del u\nwith v as w: x += 1\n")
    module = cst.parse_module(source)
    census = _names.census(module)
    assert {name: role for (name, role) in census.counts} == {
        "a": Role.IMPORTED, "b": Role.IMPORTED, "c": Role.IMPORT, "d": Role.IMPORTED, "e": Role.IMPORTED,
        "f": Role.IMPORT, "g": Role.IMPORT, "h": Role.UNPACK, "i": Role.UNPACK, "j": Role.READ,
        "k": Role.ATTRIBUTE, "l": Role.FOR, "m": Role.READ, "n": Role.KEYWORD, "o": Role.READ,
        "p": Role.DEF, "q": Role.PARAM, "r": Role.PARAM, "s": Role.READ, "t": Role.GLOBAL, "u": Role.DEL,
        "v": Role.READ, "w": Role.AS, "x": Role.AUG_ASSIGN}
