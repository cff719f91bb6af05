"""Constant propagation (names bound once, registry lookups, recorded values): exact outputs."""
from __future__ import annotations

from reducer.analysis.trace import CallRecord, TraceData
from tests.reducer_support import RecordingOracle, raises, reduce_with


def test_inline_name_bound_once_to_a_literal() -> None:
    src = "N = 512\nM = 2\nM += 1\nraise KeyError(N, M)\n"
    out = reduce_with(src, raises(KeyError, "512"), "propagate_constants")
    assert out == "M = 2\nM += 1\nraise KeyError(512, M)\n"


def test_registry_lookup_becomes_the_value_and_the_registry_goes() -> None:
    src = ('REGISTRY = {"gemma": {"target": ["q_proj"]}, "llama": {"target": ["k_proj"]}}\n'
           'spec = REGISTRY["gemma"]\nraise KeyError(spec.get("target"))\n')
    out = reduce_with(src, raises(KeyError, "q_proj"), "propagate_constants")
    assert out == 'raise KeyError(["q_proj"])\n'


def test_recorded_value_replaces_a_helper_call() -> None:
    src = ("def targets(cfg):\n    return [m for m in cfg['mods'] if m.startswith('q')]\n"
           "CFG = {'mods': ['q_proj', 'v_proj']}\n"
           "def configure(target_modules):\n    raise KeyError(target_modules)\n"
           "configure(target_modules=targets(CFG))\n")
    trace = TraceData(src, lines=set(range(1, 7)),
                      calls=[CallRecord(6, "configure", ["target_modules"], {"target_modules": "['q_proj']"}),
                             CallRecord(6, "targets", ["cfg"], {"cfg": "{'mods': ['q_proj', 'v_proj']}"})])
    oracle = RecordingOracle(raises(KeyError, "q_proj"))
    runs = oracle.runs

    out = reduce_with(src, oracle, "recorded_values", trace=trace)
    assert out == ("def configure(target_modules):\n    raise KeyError(target_modules)\n"
                   "configure(target_modules=['q_proj'])\n")
    assert len(runs) == 1       # all recorded values in one candidate, before any one-by-one


def test_recorded_values_one_by_one_when_all_at_once_fails() -> None:
    src = "def f(a, b):\n    raise KeyError(a, type(b).__name__)\nx = [1]\nf(a=len(x), b=tuple(x))\n"
    trace = TraceData(src, calls=[CallRecord(4, "f", ["a", "b"], {"a": "1", "b": "(1,)"})])
    # b must stay a tuple *expression* for the message to say 'tuple': (1,) is one too, but the
    # oracle below insists that `tuple(` stays, so only `a` may become literal
    out = reduce_with(src, lambda s: "tuple(x)" in s and raises(KeyError, "tuple")(s), "recorded_values", trace=trace)
    assert out == "def f(a, b):\n    raise KeyError(a, type(b).__name__)\nx = [1]\nf(a=1, b=tuple(x))\n"


def test_recorded_sites_with_two_values_are_not_constants() -> None:
    src = "def f(x):\n    pass\nfor v in (1, 2):\n    f(x=v)\n"
    trace = TraceData(src, calls=[CallRecord(4, "f", ["x"], {"x": "1"}), CallRecord(4, "f", ["x"], {"x": "2"})])
    assert trace.literal_sites() == {}
    trace1 = TraceData(src, calls=[CallRecord(4, "f", ["x"], {"x": "2"})])
    assert trace1.literal_sites() == {("f", "v"): "2"}
