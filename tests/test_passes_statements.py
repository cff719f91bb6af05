"""Statement deletion (HDD + find_integer runs), checked on exact output sources."""
from __future__ import annotations

import libcst as cst

from reducer.passes.loops import find_integer
from reducer.passes.statements import blocks_by_depth
from tests.reducer_support import raises, reduce_with

SRC = '''import os
import sys
A = 1
B = 2
C = 3
def f():
    x = 1
    y = 2
    raise ValueError("boom")
D = 4
f()
E = 5
'''


def test_deletes_everything_irrelevant_at_every_depth() -> None:
    out = reduce_with(SRC, raises(ValueError, "boom"), "delete_statements")
    assert out == 'def f():\n    raise ValueError("boom")\nf()\n'


def test_last_statement_of_a_block_leaves_pass() -> None:
    src = "if True:\n    x = 1\nraise ValueError('boom')\n"
    # the `if` itself can go; with only the body deletable, `pass` keeps the block valid
    out = reduce_with(src, raises(ValueError), "delete_statements")
    assert out == "raise ValueError('boom')\n"
    pred = raises(ValueError)
    out2 = reduce_with("if True:\n    x = 1\n    raise ValueError('boom')\nq = 2\n", pred, "delete_statements")
    assert out2 == "if True:\n    raise ValueError('boom')\n"


def test_semicolon_separated_statements_are_statements_too() -> None:
    out = reduce_with("a = 1; b = 2; raise ValueError(a)\n", raises(ValueError, "1"), "delete_statements")
    assert out == "a = 1; raise ValueError(a)\n"


def test_blocks_are_ordered_shallowest_first() -> None:
    m = cst.parse_module("def f():\n    if x:\n        pass\nclass C:\n    def g(self):\n        pass\n")
    depths = [type(b).__name__ for b in blocks_by_depth(m)]
    assert depths[0] == "Module"
    bodies = [m.code_for_node(b).strip().splitlines()[0] for b in blocks_by_depth(m)[1:]]
    assert bodies == ["if x:", "def g(self):", "pass", "pass"]


def test_long_irrelevant_runs_cost_logarithmic_runs() -> None:
    body = "".join(f"v{i} = {i}\n" for i in range(200))
    src = "import json\n" + body + "json.loads('{')\n"
    calls = []

    def oracle(s: str) -> bool:
        calls.append(s)
        return raises(ValueError, "Expecting property name")(s)

    out = reduce_with(src, oracle, "delete_statements")
    assert out == "import json\njson.loads('{')\n"
    # 200 deletable lines in one run: ~2*log2(200) probes, nothing like 200 single deletions
    assert len(calls) < 40


def test_find_integer_probes_then_doubles_then_bisects() -> None:
    seen = []

    def f(n: int) -> bool:
        seen.append(n)
        return n <= 37

    assert find_integer(f) == 37
    assert seen[:4] == [1, 2, 3, 4]
    assert seen[4:7] == [8, 16, 32]
    assert len(seen) <= 4 + 4 + 6
    assert find_integer(lambda n: n <= 2) == 2


def test_find_integer_tells_ahead_the_probes_that_may_come_and_probes_the_same() -> None:
    for limit in (0, 3, 5, 8, 13, 37, 64, 100):
        plain: list[int] = []
        told: list[list[int]] = []
        with_ahead: list[int] = []
        a = find_integer(lambda n: plain.append(n) or n <= limit)
        b = find_integer(lambda n: with_ahead.append(n) or n <= limit, told.append)
        assert a == b == limit and plain == with_ahead
        # every probe past the linear four was announced (first) before it was made, and each
        # announcement names only probes inside the bracket still open
        for probe, announced in zip(with_ahead[4:], told, strict=False):
            assert announced[0] == probe
        assert all(n > 0 for batch in told for n in batch)
