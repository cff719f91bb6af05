"""The boundary call first (issue #31): the call that entered the library where the failure was
raised, with the values its arguments had when it failed, offered as the whole program before
anything else; the slice that builds an argument that cannot be written as a value, kept."""
from __future__ import annotations

import sys

from reducer.boundary import boundary_run, matching
from reducer.passes import PRELUDE
from reducer.passes.boundary import candidates
from reducer.search import Reducer
from reducer.trace import TraceData, subprocess_run_fn
from tests.reducer_support import SubprocessOracle


def _traced(source: str) -> TraceData:
    trace = TraceData(source, lines=set(range(1, source.count("\n") + 2)))
    trace.boundary = boundary_run(source, subprocess_run_fn(sys.executable))   # type: ignore[attr-defined]
    return trace


class Recording(SubprocessOracle):
    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.seen: list[str] = []

    def __call__(self, source: str) -> bool:
        self.seen.append(source)
        return super().__call__(source)


def _reduce(source: str, **kw):
    base = SubprocessOracle.for_source(source)
    oracle = Recording(base.target, base.options)
    reducer = Reducer(source, oracle, trace=_traced(source), format_result=False, jobs=1, **kw)
    return reducer.run(), oracle


LITERAL = '''
import statistics

SAMPLES = [3.0, 1.0, 2.0]

def cuts(data, buckets):
    n = buckets - 1
    return statistics.quantiles(data, n=n)

def main():
    out = []
    for b in [4, 3, 1]:
        out.append(cuts(SAMPLES, b))
    print(out)

main()
'''


def test_the_launcher_records_the_failing_calls_own_values():
    # The call site ran three times (n = 3, 2, 0): the trace's latest-per-site record pins
    # nothing down, the boundary record has the failing call's 0.
    found = matching(boundary_run(LITERAL, subprocess_run_fn(sys.executable)), "statistics.StatisticsError", "")
    assert found[0].exc_type == "statistics.StatisticsError"
    assert found[0].value("n") == "0" and found[0].value("data") == "[3.0, 1.0, 2.0]"
    assert found[0].object_of("statistics.quantiles") == "statistics:quantiles"


def test_boundary_call_is_offered_first_and_accepted_when_it_reproduces():
    result, oracle = _reduce(LITERAL, passes=[], prelude=PRELUDE)
    expected = "import statistics\nstatistics.quantiles([3.0, 1.0, 2.0], n=0)\n"
    assert oracle.seen[0] == expected       # the first run
    assert result.best_source == expected
    assert result.stats.passes["boundary_call"].accepted == 1


NEEDS_BUILDER = '''
import json

class Point:
    def __init__(self, x):
        self.x = x

def save(points):
    payload = {"points": points, "count": len(points)}
    return json.dumps(payload)

pts = [Point(1)]
save(pts)
'''


def test_an_argument_that_is_no_value_keeps_the_slice_that_builds_it():
    # The payload holds a Point: no literal candidate; the slice keeps the class and the binding.
    trace = _traced(NEEDS_BUILDER)
    found = candidates(NEEDS_BUILDER, matching(trace.boundary, "TypeError", ""), lambda e, v: True)
    assert found, "a slice candidate"
    assert all("class Point" in c for c in found)
    result, oracle = _reduce(NEEDS_BUILDER, passes=[], prelude=PRELUDE)
    assert "class Point" in result.best_source and "json.dumps(payload)" in result.best_source
    assert "def save" not in result.best_source


RECEIVER = '''
import csv, sys

def export(rows, fields):
    writer = csv.DictWriter(sys.stdout, fieldnames=fields)
    for row in rows:
        writer.writerow(row)

export([{"id": 1}, {"id": 2, "region": "eu"}], ["id"])
'''


def test_a_guess_that_fails_differently_is_not_accepted_and_the_slice_is():
    result, oracle = _reduce(RECEIVER, passes=[], prelude=PRELUDE)
    # first offered: a DictWriter built with no arguments (a TypeError: refused)
    assert oracle.seen[0] == "import csv\ncsv.DictWriter().writerow({'id': 2, 'region': 'eu'})\n"
    assert result.best_source == ("import csv\nimport sys\nfields = ['id']\n"
                                  "writer = csv.DictWriter(sys.stdout, fieldnames=fields)\n"
                                  "writer.writerow({'id': 2, 'region': 'eu'})\n")


def test_a_value_read_from_the_environment_is_never_written(monkeypatch):
    source = '''
import os, shlex
command = os.environ.get("REPROBOT_TEST_COMMAND", "")
shlex.split(command)
'''
    monkeypatch.setenv("REPROBOT_TEST_COMMAND", 'run "unbalanced')
    trace = _traced(source)
    allowed = trace._allowed()
    found = candidates(source, matching(trace.boundary, "ValueError", ""), allowed)
    assert not any("unbalanced" in c for c in found)


def test_no_boundary_no_candidate():
    assert candidates("x = 1\n", [], lambda e, v: True) == []


def test_imports_of_one_module_are_one_statement():
    from reducer.passes.boundary import _merged
    assert _merged(["from transformers import GPT2Config", "import torch", "from transformers import GPT2LMHeadModel",
                    "from transformers import GPT2Config", "from peft import LoraConfig"]) == \
        ["from transformers import GPT2Config, GPT2LMHeadModel", "import torch", "from peft import LoraConfig"]
