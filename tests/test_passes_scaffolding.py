"""Issue #31's scaffolding passes and the heavier level: before/after on each rewrite, real
reductions, and properties (hypothesis) that a program whose candidate fails differently is
never changed."""
from __future__ import annotations

import textwrap

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reducer.analysis.trace import TraceData
from reducer.passes import BY_NAME, HEAVY
from reducer.passes import scaffolding as S
from reducer.passes.heavy import all_instances_replaced, heavy_candidates, unrolled
from reducer.search.driver import Reducer
from reducer.search.loop import SearchLoop
from tests.reducer_support import raises, reduce_with


def _d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _alternatives(source: str, find, alternatives) -> list[str]:
    module = cst.parse_module(source)
    return [a for t in find(module) for a in alternatives(module, t) if a is not None]


# ---- annotations -------------------------------------------------------------------------------
def test_annotations_go_but_a_dataclass_keeps_its_fields():
    before = _d('''
        from dataclasses import dataclass
        @dataclass
        class Req:
            x: int
            y: "str" = "a"
        def f(a: Req, *args: int, b: int = 1, **kw: str) -> list[Req]:
            z: int = 3
            w: int
            return [a]
        ''')
    after = _d('''
        from dataclasses import dataclass
        @dataclass
        class Req:
            x: int
            y: "str" = "a"
        def f(a, *args, b=1, **kw):
            z = 3
            return [a]
        ''')
    assert S.without_annotations(cst.parse_module(before)) == after


def test_a_class_only_annotations_named_goes_after_them():
    src = _d('''
        import json
        class Response:
            pass
        def complete(payload: str) -> Response:
            return json.loads(payload)
        complete('{"a": 1,}')
        ''')
    out = reduce_with(src, raises(ValueError, "Expecting property name"), "drop_annotations", "cleanup")
    assert "Response" not in out and "def complete(payload):" in out


# ---- builtin higher-order calls -----------------------------------------------------------------
def test_higher_order_calls_become_direct_calls():
    src = _d('''
        import functools
        out = list(map(svc.complete, reqs))
        list(map(check, [1]))
        functools.reduce(lambda a, b: a + b, xs, 0)
        sorted(rows, key=by_name)
        y = list(filter(ok, rows))
        ''')
    alts = _alternatives(src, S._higher_order, S._higher_order_alternatives)
    assert "svc.complete(reqs[0])\n" in alts[0] and "out = [svc.complete(reqs[0])]" in alts[1]
    assert any("\ncheck(1)\n" in a for a in alts)
    assert any("(lambda a, b: a + b)(0, xs[0])" in a for a in alts)
    assert any("\nby_name(rows[0])\n" in a for a in alts)
    assert any("\nok(rows[0])\n" in a for a in alts)


def test_a_failure_reached_through_builtin_map_is_called_directly():
    src = _d('''
        import fractions
        def parse(text):
            return fractions.Fraction(text)
        prices = ["1.5.2"]
        totals = list(map(parse, prices))
        print(totals)
        ''')
    out = reduce_with(src, raises(ValueError, "Invalid literal for Fraction: '1.5.2'"), "direct_higher_order")
    assert "parse(prices[0])" in out and "map" not in out


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True), bad=st.integers(0, 3),
       form=st.sampled_from(["list(map(f, xs))", "ys = list(map(f, xs))", "sorted(xs, key=f)",
                             "list(filter(f, xs))", "functools.reduce(lambda a, x: a + f(x), xs, 0)"]))
def test_higher_order_never_changes_a_program_whose_direct_call_fails_differently(values, bad, form):
    """The direct call is on the first element: when another element is the failing one, the
    candidate fails differently (or not at all) and the program stays as it was."""
    bad_value = values[bad % len(values)]
    src = (f"import functools\ndef f(x):\n    if x == {bad_value}:\n        raise ValueError('bad %d' % x)\n"
           f"    return x\nxs = {values!r}\n{form}\n")
    oracle = raises(ValueError, f"bad {bad_value}")
    assert oracle(src)
    out = reduce_with(src, oracle, "direct_higher_order")
    assert oracle(out)
    if values[0] != bad_value:
        assert out == src
    elif "reduce" not in form:
        assert "f(xs[0])" in out


# ---- methods reached once ----------------------------------------------------------------------
def test_a_method_reached_once_becomes_a_function():
    src = _d('''
        class Service:
            def __init__(self):
                self.n = 1
            def complete(self, req):
                return req * 2
            def scaled(self, x):
                return self.n * x
        s = Service()
        s.complete(3)
        s.scaled(4)
        ''')
    alts = _alternatives(src, S.method_targets, S._method_alternatives)
    assert "def complete(req):\n    return req * 2\n" in alts[0] and "\ncomplete(3)\n" in alts[0]
    assert "def complete(self, req):" in alts[1] and "\ncomplete(s, 3)\n" in alts[1]
    assert any("\nscaled(s, 4)\n" in a for a in alts)              # reads self: kept as an argument
    assert not any("\nscaled(4)\n" in a for a in alts)


def test_the_method_then_inlines_and_the_class_goes():
    src = _d('''
        import shlex
        class Runner:
            def __init__(self, name):
                self.name = name
            def run(self, command):
                return shlex.split(command)
        r = Runner("x")
        r.run('echo "open')
        ''')
    out = reduce_with(src, raises(ValueError, "No closing quotation"), "methods_to_functions", "inline_functions",
                      "delete_statements", "cleanup")
    assert "class" not in out and "shlex.split" in out


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(uses_self=st.booleans(), bad=st.booleans())
def test_methods_never_change_a_program_that_then_fails_differently(uses_self, bad):
    body = "self.limit + x" if uses_self else "x"
    src = (f"class C:\n    def __init__(self):\n        self.limit = {0 if bad else 1}\n"
           f"    def check(self, x):\n        if {body} == 0:\n            raise ValueError('zero')\n        return x\n"
           "c = C()\nc.check(0)\n")
    oracle = raises(ValueError, "zero")
    if not oracle(src):
        return
    out = reduce_with(src, oracle, "methods_to_functions")
    assert oracle(out)
    if uses_self:
        assert "check(c, 0)" in out or out == src


# ---- comprehensions over one element ------------------------------------------------------------
def test_a_helpers_comprehension_becomes_its_element():
    src = "def make(n):\n    return [Req(i, PROMPTS[i % 3]) for i in range(n)]\nys = {f(x) for x in xs}\n"
    alts = _alternatives(src, S._comprehensions, S._comprehension_alternatives)
    assert "return [Req(0, PROMPTS[0 % 3])]" in alts[0]
    assert "ys = {f(xs[0])}" in alts[1]


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 3), bad=st.integers(0, 2))
def test_comprehension_never_changes_a_program_whose_element_fails_differently(n, bad):
    src = (f"def make(n):\n    return [check(i) for i in range(n)]\ndef check(i):\n"
           f"    if i == {bad}:\n        raise KeyError('slot %d' % i)\n    return i\nmake({n})\n")
    oracle = raises(KeyError, f"slot {bad}")
    if not oracle(src):
        return
    out = reduce_with(src, oracle, "comprehension_to_element")
    assert oracle(out)
    assert (out != src) == (bad == 0)


# ---- the heavier level -------------------------------------------------------------------------
def test_instances_of_simple_classes_become_their_values():
    src = _d('''
        from dataclasses import dataclass
        import shlex
        @dataclass
        class Job:
            name: str
            command: str = "true"
        class Ctx:
            def __init__(self, job, retries=2):
                self.job = job
                self.tries = retries + 1
        job = Job("a", 'echo "x')
        ctx = Ctx(job)
        shlex.split(ctx.job.command * ctx.tries)
        ''')
    out = all_instances_replaced(src)
    # ctx goes (its fields read the constructor's arguments); job is also named inside Ctx, so
    # it is left (a name the rewrite cannot tell apart is never touched)
    assert out is not None and "shlex.split(job.command * (2 + 1))" in out and "ctx" not in out
    assert all_instances_replaced("class P:\n    def __init__(self, x):\n        self.x = x\n"
                                  "p = P(1)\np.x = 2\nprint(p.x)\n") is None     # a field written: left


def test_loops_that_ran_once_are_unrolled():
    src = "for row in rows:\n    check(row)\nfor k in keys:\n    use(k)\n"
    trace = TraceData(src, binds=[__import__("reducer.analysis.trace", fromlist=["BindRecord"]).BindRecord(1, "row", None, 1)])
    assert unrolled(src, trace) == "row = rows[0]\ncheck(row)\nfor k in keys:\n    use(k)\n"
    assert unrolled(src, None) is None


def test_heavy_candidates_put_everything_in_one_first():
    src = _d('''
        import shlex
        class Runner:
            def run(self, command):
                return shlex.split(command)
        def main():
            Runner().run('echo "open')
        main()
        ''')
    found = heavy_candidates(src, None)
    assert found and "class Runner" not in found[0] and "def main" not in found[0]


SLOW_TO_FIX = _d('''
    import shlex
    class Runner:
        def run(self, command):
            return shlex.split(command)
    def main():
        Runner().run('echo "open')
    main()
    ''')


def test_the_heavier_level_runs_when_the_fixpoint_comes_before_the_budget():
    r = Reducer(SLOW_TO_FIX, raises(ValueError, "No closing quotation"), phases=[[BY_NAME["cleanup"]]],
                heavy=HEAVY, format_result=False, max_time=120)
    result = r.run()
    assert result.stats.heavy_rounds >= 1 and result.stats.heavy_gains >= 1
    assert "class Runner" not in result.best_source


def test_the_heavier_level_does_not_run_after_the_budget(monkeypatch):
    monkeypatch.setattr(SearchLoop, "HEAVY_SHARE", 0.0)
    r = Reducer(SLOW_TO_FIX, raises(ValueError, "No closing quotation"), phases=[[BY_NAME["cleanup"]]],
                heavy=HEAVY, format_result=False, max_time=120)
    result = r.run()
    assert result.stats.heavy_rounds == 0 and "not before" in result.stats.heavy_skipped
    assert "class Runner" in result.best_source


def test_the_heavier_level_belongs_to_the_default_search_only():
    assert Reducer("x = 1\n", lambda s: False, passes=[BY_NAME["cleanup"]]).loop.heavy == []
    assert Reducer("x = 1\n", lambda s: False).loop.heavy == HEAVY
