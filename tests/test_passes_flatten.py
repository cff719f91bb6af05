"""The bulk transformations for expensive runs: the whole call chain inlined as one candidate, the
name check that refuses sure NameErrors without a run, dispatch through registries resolved by the
traced run, `**helper()` replaced by the recorded keywords, and the two-phase pass order."""
from __future__ import annotations

from reducer.analysis.cst import parse
from reducer.analysis.names import unbound_reads
from reducer.analysis.trace import CallRecord, TraceData, subprocess_run_fn, trace_run
from reducer.search.driver import Reducer
from tests.reducer_support import RecordingOracle, raises, reduce_with

CHAIN = (
    "import sys\n"
    "def load(path, size=2):\n    data = [path] * size\n    return data\n"
    "def handle(req):\n    items = load(req['path'])\n    raise KeyError(items)\n"
    "def main():\n    req = {'path': 'p'}\n    handle(req)\n    return 0\n"
    'if __name__ == "__main__":\n    sys.exit(main())\n'
)


def test_flatten_inlines_the_whole_chain_in_one_run() -> None:
    oracle = RecordingOracle(raises(KeyError, "'p', 'p'"))
    runs = oracle.runs

    out = reduce_with(CHAIN, oracle, "flatten")
    assert out == ("import sys\nreq = {'path': 'p'}\npath = req['path']\nsize = 2\ndata = [path] * size\n"
                   "items = data\nraise KeyError(items)\nsys.exit(0)\n")
    assert len(runs) == 1


def test_flatten_offers_nothing_when_nothing_is_called_once() -> None:
    src = "def f():\n    raise KeyError(1)\nf()\nf()\n"
    assert reduce_with(src, raises(KeyError), "flatten") == src


def test_unbound_reads_sees_reads_not_attributes_or_keywords() -> None:
    assert unbound_reads("import os\nx = os.path.join(a, sep=b)\nprint(x.c, len(x))\n") == {"a", "b"}
    assert unbound_reads("from m import *\nprint(q)\n") is None
    # every binding form counts, in any scope (one namespace): nothing here is unbound
    assert unbound_reads("import a.b as c, d.e\nfrom f import g as h\ndef k(p, *q, r=1, **s):\n"
                         "    global t\n    t = p\nclass U: pass\nfor v in w(): pass\n"
                         "try:\n    pass\nexcept E as x:\n    pass\n[y for y in (z := [1])]\n"
                         "with open('f') as fh:\n    pass\n"
                         "print(c, d, h, k, q, r, s, t, U, v, x, y, z, fh)\n") == {"w", "E"}


def test_gate_refuses_a_candidate_that_unbinds_a_read_name_without_running_it() -> None:
    src = "x = 1\ny = 2\nraise KeyError(x)\n"
    oracle = RecordingOracle(raises(KeyError))
    runs = oracle.runs

    r = Reducer(src, oracle, passes=[], format_result=False)
    assert r.consider("y = 2\nraise KeyError(x)\n") is False
    assert runs == [] and r.stats.for_pass("setup").unbound == 1
    assert r.consider("x = 1\nraise KeyError(x)\n") is True and len(runs) == 1


def test_dispatch_through_a_registry_is_resolved_and_the_registry_goes(tmp_path) -> None:
    src = ("REG = {}\n"
           "def register(name):\n    def wrap(fn):\n        REG[name] = fn\n    return wrap\n"
           "@register('a')\ndef job_a(x):\n    raise KeyError(x)\n"
           "@register('b')\ndef job_b(x):\n    return x\n"
           "kind = 'a'\nREG[kind](3)\n")
    trace = trace_run(src, subprocess_run_fn())
    assert trace.dispatch_sites() == {"REG[kind]": "job_a"}
    out = reduce_with(src, raises(KeyError, "3"), "resolve_dispatch", trace=trace)
    # the registering decorator returned None: the call only works once it is gone
    assert "def job_a(x):\n    raise KeyError(x)\n" in out and "job_a(3)" in out and "@register('a')" not in out


def test_a_worker_loop_dispatching_several_handlers_is_resolved_to_the_failing_one() -> None:
    """``fn = HANDLERS.get(job); fn(job)`` ran two handlers in the traced run of the original, so
    the site is not a constant; once the loop is down to the failing job, the oracle says which
    handler the failure needs."""
    defs = ("HANDLERS = {}\n"
            "def handler(kind):\n    def wrap(fn):\n        HANDLERS[kind] = fn\n        return fn\n    return wrap\n"
            "@handler('ping')\ndef a_ping(job):\n    return job\n"
            "@handler('ingest')\ndef b_ingest(job):\n    raise KeyError(job)\n"
            "@handler('sleep')\ndef c_sleep(job):\n    return job\n")
    original = defs + "for job in ['ping', 'ingest', 'sleep']:\n    fn = HANDLERS.get(job)\n    fn(job)\n"
    trace = trace_run(original, subprocess_run_fn())
    assert trace.dispatch_choices() == {"fn": ["a_ping", "b_ingest"]}  # the loop stopped at ingest
    assert trace.dispatch_sites() == {}
    best = defs + "job = 'ingest'\nfn = HANDLERS.get(job)\nfn(job)\n"
    out = reduce_with(best, raises(KeyError, "ingest"), "resolve_dispatch", trace=trace)
    assert "b_ingest(job)" in out and "fn(job)" not in out


def test_dispatch_to_a_class_names_the_class_that_was_built() -> None:
    src = ("class Base:\n    def __init__(self, v):\n        raise KeyError(type(self).__name__)\n"
           "class Child(Base):\n    pass\nREG = {'c': Child}\nREG['c'](1)\n")
    trace = trace_run(src, subprocess_run_fn())
    assert trace.dispatch_sites() == {"REG['c']": "Child"}


def test_star_kwargs_helper_becomes_the_recorded_keywords() -> None:
    src = ("def budget(n):\n    return {'max_memory': {0: n * 2, 'cpu': '8GiB'}}\n"
           "def load(model, path, adapter_name='default', **kwargs):\n"
           "    raise RuntimeError(str(kwargs['max_memory'][0]))\n"
           "load(None, 'p', adapter_name='x', **budget(21))\n")
    trace = trace_run(src, subprocess_run_fn())
    assert trace.literal_sites()[("load", "**budget(21)")] == "{'max_memory': {0: 42, 'cpu': '8GiB'}}"
    out = reduce_with(src, raises(RuntimeError, "42"), "recorded_values", trace=trace)
    assert out.endswith("load(None, 'p', adapter_name='x', max_memory={0: 42, 'cpu': '8GiB'})\n")
    assert "def budget" not in out


def test_loop_unwrap_turns_its_own_break_into_pass_and_binds_the_first_item() -> None:
    src = "for item in [3, 4]:\n    if item is None:\n        break\n    raise KeyError(item)\n"
    out = reduce_with(src, raises(KeyError, "3"), "unwrap")
    assert out == "item = [3, 4][0]\nraise KeyError(item)\n"


def test_empty_if_with_a_harmless_test_is_cleaned_up_in_bulk() -> None:
    src = "CACHE = {}\nkey = 1\nif key in CACHE:\n    pass\nif not key:\n    pass\nraise KeyError(key)\n"
    assert reduce_with(src, raises(KeyError), "cleanup_bulk") == "key = 1\nraise KeyError(key)\n"


def test_dict_keys_are_not_shortened_and_fstrings_give_up_their_calls() -> None:
    # the key stays whole; a size-like key's value stops at one element (a config written as a
    # dict is a config), any other key's value goes to zero
    src = 'cfg = {"hidden_size": 64, "seed": 64}\nraise KeyError(cfg)\n'
    assert reduce_with(src, raises(KeyError, "hidden_size"), "shrink_literals") == \
        'cfg = {"hidden_size": 1, "seed": 0}\nraise KeyError(cfg)\n'
    fs = 'def f():\n    raise KeyError(1)\nx = f"value {f():.1f}"\n'
    assert reduce_with(fs, raises(KeyError), "shrink_literals") == 'def f():\n    raise KeyError(0)\nx = f()\n'


def test_each_phase_reaches_its_fixpoint_before_the_next_runs() -> None:
    from reducer.passes import Pass
    log: list[tuple[str, str]] = []

    def dropper(prefix: str):
        def fn(gate) -> None:
            log.append((prefix, gate.best))
            lines = gate.best.splitlines(keepends=True)
            for i, line in enumerate(lines):
                if line.startswith(prefix):
                    gate.consider("".join(lines[:i] + lines[i + 1:]))
                    return
        return fn

    src = "s1 = 1\nf1 = 2\ns2 = 3\nf2 = 4\nraise KeyError(0)\n"
    out = Reducer(src, raises(KeyError), phases=[[Pass("coarse", dropper("s"))], [Pass("fine", dropper("f"))]],
                  format_result=False, name_check=False).run().best_source
    assert out == "raise KeyError(0)\n"
    fine_calls = [best for name, best in log if name == "f"]
    assert fine_calls and all("s1" not in b and "s2" not in b for b in fine_calls)
    # a fine change sends the search back to the coarse phase before the fine one runs again
    names = [name for name, _ in log]
    assert names.count("f") == 3     # two changes, then the round that finds nothing
    assert "".join(names).find("ff") == -1


def test_fold_constants_resolves_registries_through_requests_in_one_run() -> None:
    src = ("REQUESTS = [{'model': 'tiny', 'client': 'a'}]\n"
           "MODELS = {'tiny': 'path/tiny', 'big': 'path/big'}\n"
           "ADAPTERS = {'a': 'adapters/a'}\n"
           "def cfg(model_id):\n    return MODELS[model_id]\n"
           "request = list(REQUESTS)[0]\nmodel_id = request['model']\n"
           "table = {}\ntable['x'] = 1\n"
           "raise KeyError(cfg(model_id), ADAPTERS[request['client']], table['x'])\n")
    oracle = RecordingOracle(raises(KeyError, "'path/tiny', 'adapters/a', 1"))
    runs = oracle.runs

    out = reduce_with(src, oracle, "fold_constants")
    assert len(runs) == 1
    # the parameter `model_id` of cfg is another variable: not replaced; a mutated table stays.
    # (`model_id = 'tiny'` stays too: dead-code removal counts names coarsely, the parameter's
    # loads included; the slice or statement deletion takes it next.)
    assert out == ("MODELS = {'tiny': 'path/tiny', 'big': 'path/big'}\n"
                   "def cfg(model_id):\n    return MODELS[model_id]\n"
                   "model_id = 'tiny'\ntable = {}\ntable['x'] = 1\n"
                   "raise KeyError(cfg('tiny'), 'adapters/a', table['x'])\n")


def test_flatten_sees_through_a_subscript_and_a_local_of_the_same_name() -> None:
    src = ("def load():\n    return [7]\n"
           "def main():\n    main = load()[0]\n    raise KeyError(main)\n"
           "main()\n")
    out = reduce_with(src, raises(KeyError, "7"), "flatten")
    assert out == "main = [7][0]\nraise KeyError(main)\n"


def test_lines_that_only_fill_a_dict_die_with_it() -> None:
    from reducer.passes.rewrites import drop_dead_code
    src = ('import os\nDEVICE = os.environ.get("X", "cuda")\n'
           'main = 0 if DEVICE == "cuda" else "cpu"\n'
           'device_map = {}\ndevice_map["vision"] = "cpu"\ndevice_map[""] = main\n'
           'load(device_map={"vision": "cpu", "": 0})\n')
    # the keyword `device_map=` is a parameter name, not a read of the variable
    assert drop_dead_code(src) == ('import os\nDEVICE = os.environ.get("X", "cuda")\n'
                                   'load(device_map={"vision": "cpu", "": 0})\n')
    kept = src.replace('load(device_map={"vision": "cpu", "": 0})', "load(device_map=device_map)")
    assert drop_dead_code(kept) == kept


def test_keyword_taken_through_kwargs_is_a_recorded_site_and_scratch_paths_are_not() -> None:
    src = ("import os\n"
           "def load(path, **kwargs):\n    raise KeyError(sorted(kwargs))\n"
           "here = os.path.dirname(os.path.abspath(__file__))\n"
           "dm = {'a': 'cpu'}\nload('p', device_map=dm, folder=os.path.join(here, 'x'))\n")
    trace = trace_run(src, subprocess_run_fn())
    sites = trace.literal_sites()
    assert sites[("load", "dm")] == "{'a': 'cpu'}"
    assert not any(k[1].startswith("os.path.join") for k in sites)


def test_an_alias_bound_once_folds_into_its_target() -> None:
    src = "base = [1]\nckpt = base\nraise KeyError(ckpt)\n"
    assert reduce_with(src, raises(KeyError, "[1]"), "fold_constants") == "base = [1]\nraise KeyError(base)\n"
    rebound = "base = [1]\nckpt = base\nbase = [2]\nraise KeyError(ckpt)\n"
    assert reduce_with(rebound, raises(KeyError, "[1]"), "fold_constants") == rebound


def test_parallel_window_is_filled_with_candidates_that_need_a_run() -> None:
    src = "x = 1\ny = 2\nz = 3\nraise KeyError(x)\n"
    oracle = RecordingOracle(raises(KeyError))
    runs = oracle.runs

    r = Reducer(src, oracle, jobs=2, passes=[], format_result=False)
    stream = [(0, "y = 2\nz = 3\nraise KeyError(x)\n"),      # unbinds x: no run
              (1, "x = 1\nz = 3\nraise KeyError(x)\n"),
              (2, "x = 1\ny = 2\nraise KeyError(x)\n")]
    try:
        assert r.first(iter(stream)) == 1
    finally:
        r.close()
    # the two runnable candidates were started side by side (the second may be stopped once the
    # first is accepted: it was computed from the old best); the unbinding one never ran
    assert r.stats.runs == 2 and stream[1][1] in runs
    assert set(runs) <= {stream[1][1], stream[2][1]}
    assert r.stats.for_pass("setup").unbound == 1
