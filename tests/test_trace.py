"""The trace launcher (real subprocess runs of the user's interpreter) and the first cut."""
from __future__ import annotations

import re
import sys

from reducer.analysis.trace import TraceData, subprocess_run_fn, trace_run, write_launcher
from reducer.passes.first_cut import cut
from reducer.search.driver import Reducer
from tests.reducer_support import SubprocessOracle, run_source

SCRIPT = '''import json
import sys

UNUSED_TABLE = {"a": 1}


def never_called():
    return 42


def build(name, size=3, options=None):
    return {"name": name, "size": size}


def check(cfg, flag):
    if flag:
        print("flag set")
    else:
        print("flag clear")
    return json.loads(cfg["text"])


cfg = build("tiny", size=5, options={"x": [1, 2]})
cfg["text"] = "{" + cfg["name"]
print("before", sys.argv[1:])
check(cfg, flag=len(sys.argv) > 5)
print("never reached")
x = never_called()
'''


def test_launcher_records_lines_and_literal_arguments() -> None:
    trace = trace_run(SCRIPT, subprocess_run_fn())
    lines = SCRIPT.splitlines()
    executed = {lines[n - 1].strip() for n in trace.lines if 0 < n <= len(lines)}
    assert 'cfg = build("tiny", size=5, options={"x": [1, 2]})' in executed
    assert 'print("flag clear")' in executed
    assert 'print("flag set")' not in executed
    assert 'print("never reached")' not in executed
    assert "return 42" not in executed
    build = next(c for c in trace.calls if c.func == "build")
    assert build.values == {"name": "'tiny'", "size": "5", "options": "{'x': [1, 2]}"}
    sites = trace.literal_sites()
    assert sites[("check", "flag=len(sys.argv) > 5".split("=", 1)[1])] == "False"
    assert ("build", '"tiny"') not in sites or sites[("build", '"tiny"')] == "'tiny'"


def test_launcher_traceback_reads_like_a_direct_run() -> None:
    launcher = write_launcher()
    direct = run_source(SCRIPT)
    traced = run_source(SCRIPT, launcher=[str(launcher)])
    assert traced.returncode == direct.returncode == 1
    def scrub(text: str) -> str:
        return re.sub(r"reprobot-test-\w+", "DIR", text)
    assert scrub(traced.stderr) == scrub(direct.stderr)
    assert "runpy" not in traced.stderr and "launcher" not in traced.stderr


def test_launcher_passes_arguments_and_exit_status() -> None:
    launcher = write_launcher()
    src = "import sys\nprint(sys.argv[0].endswith('script.py'), __name__)\nsys.exit(3)\n"
    proc = run_source(src, launcher=[str(launcher)])
    assert proc.returncode == 3
    assert proc.stdout.strip() == "True __main__"


def test_cut_drops_what_never_ran() -> None:
    trace = trace_run(SCRIPT, subprocess_run_fn())
    aggressive = cut(SCRIPT, trace.lines, aggressive=True)
    assert aggressive == '''import json
import sys

UNUSED_TABLE = {"a": 1}


def build(name, size=3, options=None):
    return {"name": name, "size": size}


def check(cfg, flag):
    print("flag clear")
    return json.loads(cfg["text"])


cfg = build("tiny", size=5, options={"x": [1, 2]})
cfg["text"] = "{" + cfg["name"]
print("before", sys.argv[1:])
check(cfg, flag=len(sys.argv) > 5)
'''
    conservative = cut(SCRIPT, trace.lines, aggressive=False)
    assert "def never_called():\n    pass\n" in conservative
    assert 'if flag:\n        pass\n    else:\n        print("flag clear")' in conservative


def test_first_cut_is_one_run_before_anything_else() -> None:
    oracle = SubprocessOracle.for_source(SCRIPT, timeout=20.0)
    trace = trace_run(SCRIPT, subprocess_run_fn())
    result = Reducer(SCRIPT, oracle, trace=trace).run()
    fc = result.stats.passes["first_cut"]
    assert (fc.tried, fc.accepted) == (1, 1)
    assert result.best_source == "import json\n\njson.loads('{')\n"
    assert oracle(result.best_source)


def test_trace_survives_a_forked_worker_and_a_missing_file(tmp_path) -> None:
    src = ("import multiprocessing as mp\n\ndef work(q):\n    q.put(1)\n\n"
           "if __name__ == '__main__':\n    ctx = mp.get_context('fork')\n    q = ctx.Queue()\n"
           "    p = ctx.Process(target=work, args=(q,))\n    p.start()\n    q.get()\n    p.join()\n")
    trace = trace_run(src, subprocess_run_fn())
    assert 4 in trace.lines         # `q.put(1)` ran only in the forked child
    assert TraceData.load(src, tmp_path / "missing.jsonl").lines == set()
    (tmp_path / "cut.jsonl").write_text('{"line": 3}\n{"line": 4')      # a crash mid-write
    assert TraceData.load(src, tmp_path / "cut.jsonl").lines == {3}


def test_launcher_source_is_plain_python_38() -> None:
    import ast
    from reducer.analysis.trace import LAUNCHER
    ast.parse(LAUNCHER, feature_version=(3, 8))
    assert "import coverage" not in LAUNCHER and sys.version_info >= (3, 8)


BINDINGS = '''import enum
import json


class Kind(enum.Enum):
    TEXT = "text"


def decode(raw):
    data = json.loads(raw)
    return data


jobs = ['{"a": 1}', '{"b": 2}']
for i, raw in enumerate(jobs[:1]):
    first = decode(raw)
for raw in jobs:
    last = decode(raw)
settings = {"kind": Kind.TEXT,
            "sizes": [1, 2]}
handle = open
try:
    broken = json.loads("{")
except ValueError:
    pass
'''


def test_launcher_records_what_each_binding_held() -> None:
    trace = trace_run(BINDINGS, subprocess_run_fn())
    sites = trace.binding_sites()
    # a loop that ran once: its names, one value each
    assert sites[("for", "i, raw", "enumerate(jobs[:1])")] == {"i": "0", "raw": "'{\"a\": 1}'"}
    assert sites[("=", "first", "decode(raw)")] == {"first": "{'a': 1}"}
    # a statement spread over two lines, holding the script's own enum member
    assert sites[("=", "settings", '{"kind": Kind.TEXT,\n            "sizes": [1, 2]}')] == {
        "settings": "{'kind': Kind.TEXT, 'sizes': [1, 2]}"}
    # bound twice to different values, or to something without a source form: nothing pinned
    assert not any(k[1] in ("last", "data", "handle") for k in sites)
    assert ("for", "raw", "jobs") not in sites
    # the statement raised: it bound nothing
    assert not any(b.name == "broken" for b in trace.binds)


def test_a_call_site_seen_with_two_values_is_not_a_constant() -> None:
    src = "import json\nfor text in ['1', '[']:\n    try:\n        json.loads(text)\n    except ValueError:\n        pass\n"
    trace = trace_run(src, subprocess_run_fn())
    loads = next(c for c in trace.calls if c.func == "loads")
    assert "s" in loads.varies
    assert ("json.loads", "text") not in trace.literal_sites()


def test_binding_records_survive_the_saved_trace() -> None:
    trace = trace_run(BINDINGS, subprocess_run_fn())
    again = TraceData.from_dict(BINDINGS, trace.to_dict())
    assert again.binding_sites() == trace.binding_sites() and again.binds


def test_small_tensors_and_a_tokenizer_s_batch_are_recorded_as_source() -> None:
    # what a training loop feeds its model step after step: written out, the tokenizer that made it
    # is no longer needed; a big tensor, one that needs grad, or an empty one has no source form here
    src = ("import torch\nfrom transformers import BatchEncoding\n"
           "for step in range(2):\n"
           "    ids = torch.tensor([[5, 7]])\n"
           "    half = torch.ones(2, dtype=torch.float16)\n"
           "    batch = BatchEncoding({'input_ids': ids, 'attention_mask': torch.ones(1, 2, dtype=torch.long)})\n"
           "    big = torch.zeros(100)\n"
           "    weight = torch.ones(2, requires_grad=True)\n"
           "    empty = torch.zeros(0)\n"
           "    same_ids = torch.ones(28, 16, dtype=torch.long)\n"
           "    mixed_ids = torch.arange(100)\n")
    sites = trace_run(src, subprocess_run_fn()).binding_sites()
    values = {name: text for key, got in sites.items() if key[0] == "=" for name, text in got.items()}
    assert values["ids"] == "torch.tensor([[5, 7]])"
    assert values["half"] == "torch.tensor([1.0, 1.0], dtype=torch.float16)"
    assert values["batch"] == "{'input_ids': torch.tensor([[5, 7]]), 'attention_mask': torch.tensor([[1, 1]])}"
    assert not {"big", "weight", "empty", "mixed_ids"} & set(values)
    # a larger batch of ids all alike is its shape and its one value
    assert values["same_ids"] == "torch.full((28, 16), 1, dtype=torch.int64)"
