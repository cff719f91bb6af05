"""Values a traced run saw, put back: bindings (recorded_bindings), loops that ran once, the
value that reached a failing call, and a search that re-traces a smaller best. Traces come from
real runs of the launcher; verdicts from real runs or exec of each candidate."""
from __future__ import annotations

import json

from reducer.analysis.size import count_statements
from reducer.analysis.trace import subprocess_run_fn, trace_run
from reducer.passes import DEFAULT_PHASES
from reducer.search.driver import Reducer
from tests.reducer_support import RecordingOracle, SubprocessOracle, raises, reduce_with


def _traced(src: str):
    return trace_run(src, subprocess_run_fn())


def test_a_variable_becomes_the_value_it_held() -> None:
    head = "import json\n\n\nclass Job:\n    def __init__(self, payload):\n        self.payload = payload\n\n\n"
    src = head + "job = Job('{\"a\": 1 \"b\": 2}')\nraw = job.payload\njson.loads(raw)\n"
    out = reduce_with(src, raises(json.JSONDecodeError, "delimiter"), "recorded_bindings", trace=_traced(src), prelude=[])
    # the Job, read only by that binding, goes with it (and its class with it, as dead code): its
    # construction is a call that may do something, so the run decides (next test)
    assert out == "import json\nraw = '{\"a\": 1 \"b\": 2}'\njson.loads(raw)\n"


def test_an_object_whose_construction_mattered_stays() -> None:
    # building the Job sets the global the failure needs: the candidate without it is refused, the
    # one that keeps it is taken
    head = ("import json\nSEEN = []\n\n\nclass Job:\n    def __init__(self, payload):\n"
            "        self.payload = payload\n        SEEN.append(payload)\n\n\n")
    src = head + "job = Job('{\"a\": 1 \"b\": 2}')\nraw = job.payload\njson.loads(raw if SEEN else '{}')\n"
    out = reduce_with(src, raises(json.JSONDecodeError, "delimiter"), "recorded_bindings", trace=_traced(src), prelude=[])
    assert out == head + "job = Job('{\"a\": 1 \"b\": 2}')\nraw = '{\"a\": 1 \"b\": 2}'\njson.loads(raw if SEEN else '{}')\n"


def test_a_loop_that_ran_once_becomes_its_body() -> None:
    src = ("import ipaddress\n\ndef shard(items):\n    return [items]\n\n"
           "for i, entries in enumerate(shard(['10.0.30'])):\n    ipaddress.ip_address(entries[i])\n")
    out = reduce_with(src, raises(ValueError, "10.0.30"), "recorded_bindings", trace=_traced(src), prelude=[])
    assert out == "import ipaddress\n\ni = 0\nentries = ['10.0.30']\nipaddress.ip_address(entries[i])\n"


def test_loops_that_ran_twice_or_can_break_stay_loops() -> None:
    twice = "for x in ['1', '[']:\n    y = x\nraise KeyError(y)\n"
    oracle = RecordingOracle(raises(KeyError))
    assert reduce_with(twice, oracle, "recorded_bindings", trace=_traced(twice), prelude=[]) == twice
    assert oracle.runs == []        # y and x were bound to two values: nothing to offer
    breaks = "for x in ['1']:\n    if x:\n        break\nraise KeyError(x)\n"
    oracle = RecordingOracle(raises(KeyError))
    assert reduce_with(breaks, oracle, "recorded_bindings", trace=_traced(breaks), prelude=[]) == breaks
    assert oracle.runs == []


def _reduce_for_real(src: str, tmp_path, **kw):
    """Through the real failure search, Oracle (which keeps each accepted run's failure lines)
    and runner, as ``reprobot reduce`` does, with a fresh trace of the original."""
    from reducer.analysis.trace import runner_run_fn
    from reducer.failure.oracle import Oracle
    from reducer.failure.original import FailureSpec, find_failure
    script = tmp_path / "job.py"
    script.write_text(src, encoding="utf-8")
    failure = find_failure(FailureSpec(script=script, source=src, python="python", runs=1, timeout=60))
    oracle = Oracle(failure.runner, failure.signature, failure.spec.options, timeout=30,
                    as_itself=failure.as_itself, raised=failure.raised)
    trace = trace_run(src, runner_run_fn(failure.runner))
    return Reducer(src, oracle, trace=trace, format_result=False, **kw).run()


def test_the_value_that_reached_the_failing_call_replaces_what_built_it(tmp_path) -> None:
    head = "import enum\nimport json\n\n\nclass DType(enum.Enum):\n    F16 = 'f16'\n\n\n"
    src = head + ("layers = {'embed': DType.F16, 'head': DType.F16}\nentries = {}\n"
                  "for name, dtype in layers.items():\n    entries[name] = {'dtype': dtype}\n"
                  "json.dumps(entries, indent=0)\n")
    out = _reduce_for_real(src, tmp_path).best_source
    # the dict a loop filled, spelled with the script's own enum member; the loop is sliced away
    assert "for " not in out and "DType.F16}" in out and "class DType(enum.Enum):" in out, out
    assert count_statements(out) == 5, out


def test_the_search_traces_a_smaller_best_again(tmp_path) -> None:
    # In the original the failing call sees three payloads (two of them fail, both logged), so no value
    # is pinned down; once the other jobs are gone, a trace of the best pins the payload.
    src = ("import json\nimport logging\n\n\ndef decode(raw):\n    return json.loads(raw)\n\n\n"
           "def run(jobs):\n    out = []\n    for job in jobs:\n        try:\n            out.append(decode(job))\n"
           "        except ValueError:\n            logging.exception('bad job')\n    return out\n\n\n"
           "run(['{}', '{\"a\": 1 \"b\": 2}', 'x'])\n")
    assert ("json.loads", "raw") not in _traced(src).literal_sites()
    calls: list[str] = []

    def retrace(source: str):
        calls.append(source)
        return _traced(source)

    result = _reduce_for_real(src, tmp_path, retrace=retrace)
    assert calls and src not in calls
    assert result.stats.retraces == len(calls)
    assert count_statements(result.best_source) == 2, result.best_source
    # the payload itself (then shrunk: its text is not in the message)
    assert result.best_source.startswith("import json\njson.loads('{\"a\": 1"), result.best_source


def test_without_a_trace_nothing_is_retraced() -> None:
    src = "x = [1]\ny = x[0]\nraise KeyError(y)\n"
    calls: list[str] = []
    Reducer(src, raises(KeyError), retrace=lambda s: calls.append(s), phases=DEFAULT_PHASES,
            format_result=False).run()
    assert calls == []
