"""Property tests (hypothesis): whatever a pass proposes is valid Python, and whatever the driver
accepts compiles, on generated programs and on samples of real source files."""
from __future__ import annotations

import hashlib
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reducer.analysis.trace import TraceData
from reducer.passes import BY_NAME, DEFAULT_PASSES, HEAVY
from reducer.passes.first_cut import cut
from reducer.search.driver import Reducer

NAMES = st.sampled_from(["a", "b", "cfg", "model", "x", "self", "os", "json", "REGISTRY"])
ATOMS = st.one_of(
    st.integers(-3, 600).map(str), st.sampled_from(["0.5", "1e-3", "True", "None", "''", "'gemma'", '"q_proj"']),
    NAMES)


def _exprs() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        args = st.lists(inner, max_size=3)
        kwargs = st.lists(st.tuples(st.sampled_from(["r", "lr", "device_map"]), inner), max_size=2, unique_by=lambda t: t[0])
        return st.one_of(
            st.tuples(NAMES, args, kwargs).map(lambda t: f"{t[0]}({', '.join(t[1] + [f'{k}={v}' for k, v in t[2]])})"),
            st.tuples(NAMES, NAMES).map(lambda t: f"{t[0]}.{t[1]}"),
            args.map(lambda xs: f"[{', '.join(xs)}]"),
            args.map(lambda xs: f"({', '.join(xs)}{',' if len(xs) == 1 else ''})"),
            st.lists(st.tuples(st.sampled_from(["'k'", "'q'", "1"]), inner), max_size=3, unique_by=lambda t: t[0])
            .map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"),
            st.tuples(inner, st.sampled_from(["+", "*", "or", "and", "-"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
            st.tuples(NAMES, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        )
    return st.recursive(ATOMS, extend, max_leaves=6)


EXPR = _exprs()


def _indent(block: list[str]) -> list[str]:
    return ["    " + line for line in block] or ["    pass"]


def _blocks(in_def: bool = False) -> st.SearchStrategy[list[str]]:
    simple = st.one_of(
        st.tuples(NAMES, EXPR).map(lambda t: [f"{t[0]} = {t[1]}"]),
        EXPR.map(lambda e: [e]),
        st.just(["pass"]), st.just(["import os, json"]), st.just(["from json import loads, dumps"]),
        st.just(['"""doc."""']), st.just(["a = 1; b = 2  # note"]), st.just(["print('hi')"]),
        NAMES.map(lambda n: [f"{n} += 1"]),
        *( [EXPR.map(lambda e: [f"return {e}"])] if in_def else []),
    )

    def extend(inner: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
        body = st.lists(inner, min_size=1, max_size=3).map(lambda bs: [line for b in bs for line in b])
        return st.one_of(
            st.tuples(EXPR, body, st.none() | body).map(
                lambda t: [f"if {t[0]}:", *_indent(t[1])] + (["else:", *_indent(t[2])] if t[2] else [])),
            st.tuples(NAMES, EXPR, body).map(lambda t: [f"for {t[0]} in {t[1]}:", *_indent(t[2])]),
            st.tuples(EXPR, body).map(lambda t: [f"while {t[0]}:", *_indent(t[1])]),
            st.tuples(EXPR, body).map(lambda t: [f"with {t[0]} as cm:", *_indent(t[1])]),
            st.tuples(body, body).map(lambda t: ["try:", *_indent(t[0]), "except Exception:", *_indent(t[1]),
                                                  "finally:", "    pass"]),
            st.tuples(NAMES, body).map(lambda t: [f"def f_{t[0]}(p, q=1, *, r=None):", *_indent(t[1]) ,
                                                   "    return p", f"f_{t[0]}(1, r=2)"]),
            st.tuples(body).map(lambda t: ["class C:", "    lr = 0.5", "    def m(self):", *_indent(_indent(t[0])),
                                           "C().m()", "C.lr"]),
        )
    return st.recursive(simple, extend, max_leaves=8)


PROGRAMS = st.lists(_blocks(), min_size=1, max_size=5).map(lambda bs: "\n".join(l for b in bs for l in b) + "\n")

REAL_FILES = [p for p in sorted((Path(__file__).parent.parent / "reducer").rglob("*.py")) if p.stat().st_size < 20000]
REAL_FILES.append(Path(__file__).parent / "data" / "reducer" / "worker_long.py")


@st.composite
def sampled_real(draw) -> str:
    """A random subset of one real file's top-level statements (still valid Python)."""
    path = draw(st.sampled_from(REAL_FILES))
    module = cst.parse_module(path.read_text())
    keep = draw(st.lists(st.integers(0, len(module.body) - 1), min_size=1, max_size=3, unique=True))
    return module.with_changes(body=[module.body[i] for i in sorted(keep)]).code


def _coin(source: str) -> bool:
    """A deterministic 'oracle' that accepts about a third of candidates, so the acceptance
    paths of every pass run too."""
    return hashlib.sha1(source.encode()).digest()[0] % 3 == 0


class Recording(Reducer):
    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.proposed: list[str] = []

    def consider(self, source: str) -> bool:
        self.proposed.append(source)
        return super().consider(source)


def _check(source: str, pass_names: list[str]) -> None:
    r = Recording(source, _coin, passes=[BY_NAME[n] for n in pass_names], format_result=False, max_time=0.5,
                  trace=TraceData(source, lines=set(range(1, source.count("\n") + 1))))
    result = r.run()
    assert not [p.errors for p in result.stats.passes.values() if p.errors]
    for candidate in r.proposed:
        cst.parse_module(candidate)         # every proposal is syntactically valid
    if result.best_source != source:
        compile(result.best_source, "<best>", "exec")   # every accepted result compiles
        cst.parse_module(result.best_source)


# recorded_values needs recorded calls; tests/test_passes_constants.py covers it
PASS_NAMES = [p.name for p in DEFAULT_PASSES + HEAVY if p.name != "recorded_values"]
PASSES = st.sampled_from(PASS_NAMES).map(lambda n: [n]) | st.just(PASS_NAMES)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(source=PROGRAMS, pass_names=PASSES)
def test_passes_yield_parseable_code_on_generated_programs(source: str, pass_names: list[str]) -> None:
    try:
        compile(source, "<gen>", "exec")
    except SyntaxError:
        return          # e.g. `return` generated inside a class body
    _check(source, pass_names)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(source=sampled_real(), pass_names=PASSES)
def test_passes_yield_parseable_code_on_real_sources(source: str, pass_names: list[str]) -> None:
    _check(source, pass_names)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(source=PROGRAMS, lines=st.sets(st.integers(1, 40), max_size=30), aggressive=st.booleans())
def test_first_cut_yields_parseable_code(source: str, lines: set[int], aggressive: bool) -> None:
    out = cut(source, lines, aggressive)
    if out is not None:
        cst.parse_module(out)
        compile(out, "<cut>", "exec")


# ---- shortcuts that must not change what the reducer does ------------------------------------
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.one_of(PROGRAMS, sampled_real()))
def test_could_clean_is_never_wrong_when_it_says_no(source: str) -> None:
    """Bulk clean-up is skipped when ``could_clean`` says no: then the full clean-up must leave
    the script as it is. Checked on the program and on its cleaned form (mostly clean)."""
    from reducer.passes.cleanup import BULK, _apply, could_clean
    cleaned = _apply(source, BULK)
    for text in filter(None, (source, cleaned)):
        if not could_clean(text):
            assert _apply(text, BULK) in (text, None)


class _Drop(cst.CSTTransformer):
    """Deletes every statement (simple or compound, or one small statement of a line) whose
    hash picks it, leaving empty blocks and dangling ';' for rendering to mend."""

    def __init__(self, salt: int) -> None:
        self.salt = salt

    def _pick(self, node: cst.CSTNode) -> bool:
        return hashlib.sha1(f"{self.salt}:{cst.Module([]).code_for_node(node)}".encode()).digest()[0] % 3 == 0

    def on_leave(self, original, updated):
        if isinstance(original, (cst.BaseCompoundStatement, cst.SimpleStatementLine, cst.BaseSmallStatement)) \
                and self._pick(original):
            return cst.RemoveFromParent()
        return updated


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=PROGRAMS, salt=st.integers(0, 50))
def test_rendering_skips_expressions_without_changing_the_result(source: str, salt: int) -> None:
    from reducer.analysis.cst import _FillEmptyBlocks, render

    class Full(_FillEmptyBlocks):
        def on_visit(self, node: cst.CSTNode) -> bool:
            return cst.CSTTransformer.on_visit(self, node)

    module = cst.parse_module(source).visit(_Drop(salt))
    assert render(module) == module.visit(Full()).code


def _dead_code_through_text(source: str) -> str:
    """Dead-code removal as it ran before it worked on the tree: render and re-parse each round."""
    from reducer.analysis.cst import render
    from reducer.passes.rewrites import dead_code_round
    for _ in range(20):
        module, _removed = dead_code_round(cst.parse_module(source))
        new = render(module)
        if new == source:
            return source
        source = new
    return source


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.one_of(PROGRAMS, sampled_real()), salt=st.integers(0, 50))
def test_dead_code_on_the_tree_gives_what_the_text_rounds_gave(source: str, salt: int) -> None:
    from reducer.analysis.cst import render
    from reducer.passes.rewrites import drop_dead_code
    # also after deleting statements at random, which leaves more definitions unused
    # Same statements, line for line. Blank lines and comment lines may differ: re-parsing
    # between rounds moved what sat above the module's new first statement (blank lines, a
    # comment) into the module header, where it outlived the statement it described.
    def lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    for text in (source, render(cst.parse_module(source).visit(_Drop(salt)))):
        assert lines(drop_dead_code(text)) == lines(_dead_code_through_text(text))


# ---- the bulk clean-up chain on the tree renders what the text-to-text chain rendered ---------
_CLEAN_LINES = st.sampled_from([
    "", "", "# a comment", '"""doc."""', "'''doc'''", "import os, json", "from json import loads, dumps", "import sys",
    "print('hi')", "logger.info('x')", 'f(**{"a": 1, "b": x})', "g(a=1, **{'a': 2})", "x = 1  # note", "A = 1",
    "D = {}", "D['k'] = 2", "use(A, D)", "loads(x)", "if x: pass", "if x: import os", "if cfg.ok: pass",
    "x = 1; import sys", "import sys; x = 1;", "pass", "y = sys.argv", "description = __doc__"])


def _clean_blocks() -> st.SearchStrategy[list[str]]:
    def extend(inner: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
        body = st.lists(inner, min_size=1, max_size=4).map(lambda bs: [line for b in bs for line in b])
        return st.one_of(
            st.tuples(st.sampled_from(["x", "not ok", "k in D", "f()"]), body, st.none() | body).map(
                lambda t: [f"if {t[0]}:", *_indent(t[1])] + (["else:", *_indent(t[2])] if t[2] else [])),
            st.tuples(st.sampled_from(["a", "b", "main"]), body).map(
                lambda t: [f"def f_{t[0]}(p):", *_indent(t[1])]),
            st.tuples(st.sampled_from(["", "@dataclass", "@register"]), body).map(
                lambda t: ([t[0]] if t[0] else []) + ["class C:", *_indent(t[1])]),
            body.map(lambda b: ["try:", *_indent(b), "except Exception:", "    # swallowed", "    pass"]),
        )
    return st.recursive(_CLEAN_LINES.map(lambda line: [line]), extend, max_leaves=12)


CLEAN_PROGRAMS = st.tuples(st.lists(_clean_blocks(), min_size=1, max_size=6), st.sampled_from(["\n", "\n", "\r\n"]),
                           st.booleans()).map(
    lambda t: t[1].join(line.rstrip() if line.strip() else "" for b in t[0] for line in b) + (t[1] if t[2] else ""))


def _through_text(source: str, steps) -> str | None:
    """The bulk chain as it ran before it worked on the tree: each step parses the text the
    step before it rendered."""
    from reducer.analysis.cst import parses
    try:
        for step in steps:
            source = step.on_text(source)
    except (cst.ParserSyntaxError, cst.CSTValidationError, ValueError, RecursionError):
        return None
    return source if parses(source) else None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(source=st.one_of(CLEAN_PROGRAMS, PROGRAMS, sampled_real()))
# an emptied one-line block inside a definition dead code then removes; a first line whose
# newline is not the others' (a filled-in `pass` takes the first line's newline)
@example(source="def f_a(p):\n    if x: import os\nloads(x)\n")
@example(source="# c\r\nimport os\ndef f():\n    print(1)\nf()\n")
@example(source="def f_a(p):\n    \"\"\"doc.\"\"\"\n\n    # a comment")
@example(source="if x:\n    def f_a(p):\n        \"\"\"doc.\"\"\"\n\n        # a comment\n")
def test_bulk_chain_on_the_tree_renders_what_the_text_chain_rendered(source: str) -> None:
    from reducer.passes.cleanup import BULK, _apply
    try:
        compile(source, "<gen>", "exec")
    except SyntaxError:
        return
    assert _apply(source, BULK) == _through_text(source, BULK)
    for step in BULK:       # each step on its own, as bulk offers them when the whole chain fails
        assert _apply(source, [step]) == _through_text(source, [step])


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(source=sampled_real(), pick=st.integers(0, 10_000), kind=st.sampled_from(["name", "empty", "same"]))
@example(source="a = 1;\nif a:\n    b = 2\n", pick=18, kind="empty")     # a dangling ';' elsewhere
@example(source="if a:\n    b = 2\nc = 3; d = 4\n", pick=5, kind="empty")
def test_replacing_along_the_path_gives_what_the_full_walk_gives(source: str, pick: int, kind: str) -> None:
    """``replace`` rebuilds only the replaced node's ancestors; the text must be the full
    transform's, including a block emptied (``pass`` filled in) and a type change (parentheses)."""
    from reducer.analysis.cst import _parents, _Replace, collect, render, replace

    module = cst.parse_module(source)
    assert _parents(module) is not None     # a parsed module has no shared nodes: the path is used
    nodes = collect(module, lambda n: True)
    node = nodes[pick % len(nodes)]
    if kind == "name" and isinstance(node, cst.BaseExpression):
        new = cst.Name("zz")
    elif kind == "empty" and isinstance(node, (cst.IndentedBlock, cst.SimpleStatementLine)):
        new = node.with_changes(body=[])
    else:
        new = node.deep_clone()
    try:
        want = render(module.visit(_Replace(node, new)))
    except (cst.CSTValidationError, ValueError, TypeError) as e:
        with pytest.raises(type(e)):
            replace(module, node, new)
        return
    assert replace(module, node, new) == want
