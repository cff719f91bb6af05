"""The boundary call first (issue #31): the call that entered the library where the failure was
raised, with the values its arguments had when it failed, offered as the whole program before
anything else; the slice that builds an argument that cannot be written as a value, kept."""
from __future__ import annotations

import sys

from reducer.analysis.boundary import boundary_run, matching
from reducer.analysis.trace import TraceData, subprocess_run_fn
from reducer.passes import PRELUDE
from reducer.passes.boundary import candidates
from reducer.search.driver import Reducer
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


def test_a_library_receiver_is_written_as_the_constructor_call_that_built_it():
    result, oracle = _reduce(RECEIVER, passes=[], prelude=PRELUDE)
    # the writer, built in the failing function: its constructor call with what __init__ received
    assert oracle.seen[0] == ("import csv\nimport sys\n"
                              "csv.DictWriter(sys.stdout, fieldnames=['id']).writerow({'id': 2, 'region': 'eu'})\n")
    assert result.best_source == oracle.seen[0]


def test_a_guess_that_fails_differently_is_not_accepted_and_the_slice_is():
    # built in another function from one of its locals (no value): no constructor call to write;
    # a DictWriter built with no arguments is guessed (a TypeError: refused), then the slice
    source = RECEIVER.replace("    writer = csv.DictWriter(sys.stdout, fieldnames=fields)\n",
                              "    writer = make(fields)\n").replace(
        "def export(", "def make(fields):\n    out = io.StringIO()\n"
                       "    return csv.DictWriter(out, fieldnames=fields)\n\ndef export(").replace(
        "import csv, sys", "import csv, io")
    result, oracle = _reduce(source, passes=[], prelude=PRELUDE)
    assert oracle.seen[0] == "import csv\ncsv.DictWriter().writerow({'id': 2, 'region': 'eu'})\n"
    assert "writer = make(fields)" in result.best_source and "csv.DictWriter(out" in result.best_source


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


ENGINE_LIBRARY = '''
class Engine:
    def __init__(self, width, hooks=(), name="engine"):
        self.width, self.hooks, self.name = width, list(hooks), name

    def run(self):
        for hook in self.hooks:
            hook.before(self)
        if self.width > 8:
            raise ValueError("width %d is more than 8" % self.width)
'''

BUILT_HERE = '''
import argparse
from fakeengine import Engine

class Loud:
    def before(self, engine):
        print("starting", engine.name)

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=6)
    args = parser.parse_args([])
    engine = Engine(args.width * 2, hooks=[Loud()], name="main")
    print("built", engine.name)
    engine.run()

main()
'''


def _with_engine(tmp_path, monkeypatch) -> None:
    (tmp_path / "fakeengine.py").write_text(ENGINE_LIBRARY)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))


def test_a_receiver_the_script_built_is_written_as_its_constructor_call(tmp_path, monkeypatch):
    # `engine` has no recipe and no literal: it is written as the call that built it, with what
    # __init__ received (12, not `args.width * 2`), and the hook object, which nothing rebuilds,
    # keeps its text and its slice (the class); argparse goes
    _with_engine(tmp_path, monkeypatch)
    trace = _traced(BUILT_HERE)
    found = candidates(BUILT_HERE, matching(trace.boundary, "ValueError", ""), lambda e, v: True)
    built = [c for c in found if 'Engine(12, hooks=[Loud()], name="main").run()' in c]
    assert built, "\n----\n".join(found)
    assert "class Loud" in built[0] and "argparse" not in built[0]
    result, _ = _reduce(BUILT_HERE, passes=[], prelude=PRELUDE)
    assert 'Engine(12, hooks=[Loud()], name="main").run()' in result.best_source
    assert "argparse" not in result.best_source


def test_a_receiver_built_in_another_function_is_written_only_from_values(tmp_path, monkeypatch):
    # built in a helper: the names its arguments read are the helper's, so only values are written
    _with_engine(tmp_path, monkeypatch)
    elsewhere = BUILT_HERE.replace('    engine = Engine(args.width * 2, hooks=[Loud()], name="main")\n',
                                   '    engine = build(args)\n').replace(
        'def main():', 'def build(args):\n    return Engine(args.width * 2, hooks=[Loud()], name="main")\n\ndef main():')
    trace = _traced(elsewhere)
    found = candidates(elsewhere, matching(trace.boundary, "ValueError", ""), lambda e, v: True)
    assert not any("Engine(12" in c for c in found)
    plain = elsewhere.replace('hooks=[Loud()], ', '')
    trace = _traced(plain)
    found = candidates(plain, matching(trace.boundary, "ValueError", ""), lambda e, v: True)
    assert 'from fakeengine import Engine\nEngine(12, name="main").run()\n' in found


PADDER_LIBRARY = '''
from dataclasses import dataclass, field

@dataclass
class Padder:
    width: int
    fill: int = 0
    names: list = field(default_factory=list)

    def __call__(self, rows):
        for row in rows:
            if len(row) > self.width:
                raise ValueError("row of %d is wider than %d" % (len(row), self.width))
        return [row + [self.fill] * (self.width - len(row)) for row in rows]
'''

CALLS_AN_ATTRIBUTE = '''
from fakepadder import Padder

class Batcher:
    def __init__(self, width):
        self.inner = Padder(width, fill=-1)
        self.seen = 0

    def __call__(self, rows):
        self.seen += len(rows)
        return self.inner(rows)

def batches(rows, size):
    batcher = Batcher(3)
    return [batcher(rows[i:i + size]) for i in range(0, len(rows), size)]

batches([[1], [2, 3], [4, 5, 6, 7]], 2)
'''


def test_an_attribute_called_is_rebuilt_whole_and_a_library_dataclass_by_its_fields(tmp_path, monkeypatch):
    # `self.inner(rows)` entered Padder.__call__: its self is `self.inner`, rebuilt from the
    # dataclass's fields that are not at their defaults (width, fill; not names)
    (tmp_path / "fakepadder.py").write_text(PADDER_LIBRARY)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    trace = _traced(CALLS_AN_ATTRIBUTE)
    b = matching(trace.boundary, "ValueError", "")[0]
    assert b.recipe_of("self.inner")["expr"] == "Padder(width=3, fill=-1)"
    found = candidates(CALLS_AN_ATTRIBUTE, [b], lambda e, v: True)
    assert found[0] == "from fakepadder import Padder\nPadder(width=3, fill=-1)([[4, 5, 6, 7]])\n"


MANY_ROWS = '''
from fakepadder import Padder

def rows(n):
    out = []
    for i in range(n):
        out.append([i % 5] * (1 + i % 4))
    return out

def main():
    pad = Padder(3, fill=-1)
    batch = rows(40)
    print(len(batch), "rows")
    return pad(batch)

main()
'''


def test_the_boundary_call_is_accepted_with_fewer_statements_and_more_tokens(tmp_path, monkeypatch):
    # the rows written out are longer than the loop that built them: the whole program still has
    # a fraction of the statements, so the prelude accepts it (the value passes shrink it next)
    (tmp_path / "fakepadder.py").write_text(PADDER_LIBRARY)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    from reducer.analysis.size import count_statements, size_of
    result, oracle = _reduce(MANY_ROWS, passes=[], prelude=PRELUDE)
    assert result.best_source.startswith("from fakepadder import Padder\nPadder(width=3, fill=-1)([[0], [1, 1], ")
    assert count_statements(result.best_source) == 2 < count_statements(MANY_ROWS)
    assert size_of(result.best_source).tokens > size_of(MANY_ROWS).tokens


def test_an_iteration_signal_is_never_the_boundary_of_another_failure():
    """A loop over a csv reader ends with the reader's StopIteration reaching the script's frame:
    the launcher records it, but no candidate built on it can show a ValueError; it stays the
    boundary of a StopIteration target (``next()`` on an empty loader)."""
    from reducer.analysis.boundary import Boundary
    loop = Boundary(3, "read", "builtins.StopIteration", "")
    real = Boundary(9, "train", "builtins.ValueError", "Target size must match")
    assert matching([loop, real], "ValueError", "Target size must match") == [real]
    assert matching([loop], "StopIteration", "") == [loop]
    poll = Boundary(12, "main", "_queue.Empty", "")
    assert matching([poll, real, poll], "ValueError", "") == [real]
    assert matching([poll], "ValueError", "") == [poll]     # nothing better was recorded


def test_an_arguments_own_call_on_the_failing_line_is_never_the_boundary_call():
    """``model.generate(**enc, **req.get("params", {}))``'s shape: the failure went through the
    recorded callee (``loads``); ``opts.get`` on the same line had returned, and a candidate of it
    alone could never fail."""
    source = '''
import json

def parse(text, opts):
    return json.loads(text, **opts.get("kw", {}))

parse('{"a": 1,}', {"kw": {"parse_int": int}})
'''
    found = candidates(source, matching(boundary_run(source, subprocess_run_fn(sys.executable)), "JSONDecodeError", ""),
                       lambda e, v: True)
    assert found and all("json.loads(" in c for c in found), found


CONFIGURED = '''
import configparser
import threading


class Worker(threading.Thread):
    def __init__(self, parser, name):
        super().__init__()
        self.parser, self.section = parser, name

    def run(self):
        self.parser.add_section(self.section)


parser = configparser.ConfigParser()
parser.add_section("db")
w = Worker(parser, "db")
w.start()
w.join()
'''


def test_a_receiver_a_global_holds_keeps_what_the_script_did_to_it():
    # the worker's self.parser is the top level's parser, which the script changed after building
    # it: its constructor call alone passes (refused); the global, with that change, fails the same
    result, oracle = _reduce(CONFIGURED, passes=[], prelude=PRELUDE)
    assert oracle.seen[0] == "import configparser\nconfigparser.ConfigParser().add_section('db')\n"
    assert result.best_source == ('import configparser\nparser = configparser.ConfigParser()\n'
                                  'parser.add_section("db")\nparser.add_section(\'db\')\n')


C_RAISED = '''
def parse(rows):
    total = 0
    for r in rows:
        try:
            total += int(r)
        except ValueError:
            total -= 1
    return total


def lookup(values, wanted):
    return values.index(wanted)


parse(["1", "x", "2", "y"])
lookup([1, 2, 3], 7)
'''


def test_a_c_function_called_on_the_scripts_own_line_is_a_boundary_and_a_caught_one_is_not():
    """``values.index(wanted)`` raises inside C: no library frame to enter, the same boundary. The
    ``int(r)`` failures, caught on the next line, are no failure of the script."""
    records = boundary_run(C_RAISED, subprocess_run_fn(sys.executable))
    assert all("invalid literal" not in b.message for b in records), [b.message for b in records]
    found = matching(records, "ValueError", "7 is not in list")
    assert found[0].line == 13 and found[0].value("values") == "[1, 2, 3]" and found[0].value("wanted") == "7"
    result, oracle = _reduce(C_RAISED, passes=[], prelude=PRELUDE)
    assert oracle.seen[0] == "([1, 2, 3]).index(7)\n"     # the first run
    assert result.best_source == "([1, 2, 3]).index(7)\n"


def test_a_scripts_own_raise_is_still_no_boundary():
    source = "def check(n):\n    if n > 2:\n        raise ValueError(str(n))\n\n\ncheck(len([1, 2, 3]))\n"
    assert matching(boundary_run(source, subprocess_run_fn(sys.executable)), "ValueError", "3") == []
