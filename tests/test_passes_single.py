"""single_element: loops and comprehensions over a literal one-element iterable become their one
step, a one-element display read at [0] its element (real libcst, real runs through the gate)."""
from __future__ import annotations

import libcst as cst
import pytest

from reducer.passes.single import _targets, single_alternatives
from tests.reducer_support import SubprocessOracle, reduce_with


def _offers(source: str) -> list[str]:
    module = cst.parse_module(source)
    return [alt for t in _targets(module) for alt in single_alternatives(module, t) if alt is not None]


@pytest.mark.parametrize("before,after", [
    ("for x in [a]:\n    f(x)\n", "x = a\nf(x)\n"),
    ("for x in (a,):\n    f(x)\n", "x = a\nf(x)\n"),
    ("for x in [a]:\n    f(x)\n    if x:\n        break\n", "x = a\nf(x)\nif x:\n    pass\n"),
    ("for i, x in enumerate([a]):\n    f(i, x)\n", "i, x = 0, a\nf(i, x)\n"),
    ("for i, x in enumerate([a], start=3):\n    f(i, x)\n", "i, x = 3, a\nf(i, x)\n"),
    ("for pair in enumerate([a]):\n    f(pair)\n", "pair = (0, a)\nf(pair)\n"),
    ("for k, v in {'disk': D}.items():\n    f(k, v)\n", "k, v = 'disk', D\nf(k, v)\n"),
    ("for v in {'disk': D}.values():\n    f(v)\n", "v = D\nf(v)\n"),
    ("y = [f(x) for x in [a]]\n", "y = [f(a)]\n"),
    ("y = [f(x) for x in [a + b]]\n", "y = [f(a + b)]\n"),
    ("y = [x * 2 for x in [a + b]]\n", "y = [(a + b) * 2]\n"),
    ("y = [x.real for x in [1]]\n", "y = [(1).real]\n"),
    ("y = [o.x(x=x) for x in [a]]\n", "y = [o.x(x=a)]\n"),
    ("y = [g(i, x) for i, x in enumerate([a])]\n", "y = [g(0, a)]\n"),
    ("y = {k: v for k, v in {'a': 1}.items()}\n", "y = {'a': 1}\n"),
    ("y = {f(x) for x in [a]}\n", "y = {f(a)}\n"),
    ("y = [a][0]\n", "y = a\n"),
    ("y = (a,)[-1]\n", "y = a\n"),
    ("y = [(1, 2)][0]\n", "y = (1, 2)\n"),
    ("y = map(f, [a])\n", "y = [f(a)]\n"),
    ("for r in map(f, {'k': v}.items()):\n    g(r)\n", "for r in [f(('k', v))]:\n    g(r)\n"),
    ("[f(a)]\n", "f(a)\n"),
    ("{'edge': run(a)}\n", "run(a)\n"),
    ("procs = {'edge': run(a)}\n", "run(a)\n"),
    ("futures: list[int] = [handle(a)]\n", "handle(a)\n"),
    ("name, version = 'n', ''\nf(name)\n", "name = 'n'\nversion = ''\nf(name)\n"),
    ("filename, text = ('', 'x')\n", "filename = ''\ntext = 'x'\n"),
    ("ORDERS = [Order(1)]\nrows = [f(o) for o in ORDERS]\n", "rows = [f(Order(1))]\n"),
    ("rows: list = [r]\nfor row in rows:\n    w(row)\n", "row = r\nw(row)\n"),
])
def test_one_element_forms_become_their_element(before: str, after: str) -> None:
    assert after in _offers(before)
    compile(after, "<after>", "exec")


@pytest.mark.parametrize("source", [
    "for x in [a, b]:\n    f(x)\n",                 # two steps
    "for x in xs:\n    f(x)\n",                     # not a literal
    "for x in [a]:\n    f(x)\nelse:\n    g()\n",    # the else depends on a break
    "for x in [*xs]:\n    f(x)\n",                  # a starred element is any number of steps
    "y = [f(x) for x in [a] if x]\n",               # the condition may drop the element
    "y = [f(x) for x in [a] for z in zs]\n",        # a second clause repeats it
    "y = [(lambda x: x)(x) for x in [a]]\n",        # x is rebound inside
    "y = [a, b][0]\n",                              # two elements
    "y = [a][1]\n",                                 # out of range
    "y = map(f, [a], [b])\n",                       # two iterables
    "[f(a), g()]\n",                                # two elements
    "{key(): run(a)}\n",                            # the key is a call: dropping it drops a run
    "x: int\n",                                     # no value
    "a, b = b, a\n",                                # a swap
    "a, b = f()\n",                                 # not a tuple display
    "a, *b = 1, 2, 3\n",                            # starred
    "lo, hi = limits.lo, limits.hi\n",               # no literal: the split leads nowhere
    "y = enumerate([a], 1, 2)\nfor i, x in enumerate([a], x=1):\n    pass\n",
])
def test_other_forms_are_left_alone(source: str) -> None:
    assert _offers(source) == []


def test_a_one_element_loop_becomes_straight_line_code_through_the_gate() -> None:
    src = '''
import json

for i, (name, raw) in enumerate([("bad", '{"a": 1 "b": 2}')]):
    for k, v in {name: raw}.items():
        data = [json.loads(x) for x in [v]][0]
'''
    out = reduce_with(src, SubprocessOracle.for_source(src), "single_element")
    assert "for " not in out and "[0]" not in out
    assert "json.loads(v)" in out


@pytest.mark.parametrize("source", [
    "xs = [a]\nfor x in xs:\n    f(x)\nprint(xs)\n",    # the name is read again
    "xs = [a]\nxs = [b]\nfor x in xs:\n    f(x)\n",     # bound twice
    "xs = [a, b]\nfor x in xs:\n    f(x)\n",           # two elements
])
def test_a_loop_over_a_name_stays_unless_the_name_is_a_one_element_display_read_only_there(source: str) -> None:
    assert all("for x in xs:" in offer for offer in _offers(source))


def test_a_one_element_display_still_read_keeps_its_name_through_the_gate() -> None:
    src = '''
import json
raws = ['{"a": 1 "b": 2}']
json.loads(raws[0])
'''
    out = reduce_with(src, SubprocessOracle.for_source(src), "single_element")
    assert "raws = " in out and "json.loads(raws[0])" in out


def test_a_loop_over_two_elements_is_kept_through_the_gate() -> None:
    # The failure needs the second element: the first loop is one step, the second is not.
    src = '''
import json
seen = []
for raw in ['{"a": 1}']:
    seen.append(raw)
for raw in seen + ['{"a": 1 "b": 2}']:
    json.loads(raw)
'''
    out = reduce_with(src, SubprocessOracle.for_source(src), "single_element")
    assert "raw = '{\"a\": 1}'" in out and "for raw in seen + [" in out
