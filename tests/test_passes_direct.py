"""call_directly: the function a pool, executor, thread or process would run is called in place,
and the oracle keeps it only when the failure still shows (real runs)."""
from __future__ import annotations

import libcst as cst
import pytest

from reducer.passes.direct import direct_call
from tests.reducer_support import reduce_with


def shows(text: str):
    """A real run in a subprocess; interesting iff ``text`` is in its stderr (raised or logged)."""
    import subprocess
    import sys

    def predicate(source: str) -> bool:
        proc = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=60)
        return text in proc.stderr
    return predicate


@pytest.mark.parametrize("before,after", [
    ("pool.submit(fn, a, b=1)", "fn(a, b=1)"),
    ("pool.apply_async(fn, (a, 2), {'b': 1})", "fn(a, 2, b=1)"),
    ("pool.apply(fn, args)", "fn(*args)"),
    ("loop.run_in_executor(None, fn, a)", "fn(a)"),
    ("threading.Thread(target=fn, args=(a,), kwargs=opts)", "fn(a, **opts)"),
    ("mp.get_context('spawn').Process(target=work)", "work()"),
])
def test_hand_offs_become_direct_calls(before: str, after: str) -> None:
    call = cst.parse_expression(before)
    assert isinstance(call, cst.Call)
    new = direct_call(call)
    assert new is not None and cst.Module([]).code_for_node(new) == after


def test_a_failure_logged_by_a_thread_pool_worker_is_raised_directly() -> None:
    src = '''
import logging
from concurrent.futures import ThreadPoolExecutor

def handle(n):
    try:
        raise ValueError(f"num_return_sequences ({n}) has to be smaller or equal to num_beams (2)")
    except ValueError:
        logging.exception("request failed")

with ThreadPoolExecutor(2) as pool:
    pool.submit(handle, 3).result()
'''
    out = reduce_with(src, shows("ValueError: num_return_sequences (3)"), "call_directly")
    assert "handle(3)" in out and "submit" not in out


def test_a_thread_subclass_started_by_the_script_runs_in_the_caller() -> None:
    # the script's own Thread subclass: start() becomes run() (the work done before the next
    # statement, its failure raised there), and the join of a thread never started goes
    src = '''
import threading


class Worker(threading.Thread):
    def __init__(self, jobs):
        super().__init__()
        self.jobs = jobs

    def run(self):
        for job in self.jobs:
            {"ok": 1}[job]


w = Worker(["ok", "bad"])
w.start()
w.join()
Worker(["bad"]).start()
'''
    out = reduce_with(src, shows("KeyError: 'bad'"), "call_directly")
    assert out.endswith('w = Worker(["ok", "bad"])\nw.run()\nWorker(["bad"]).run()\n'), out
    # a thread whose failure needs the thread (its name) keeps start()
    needs = src.replace('{"ok": 1}[job]', '{"ok": 1}[job + threading.current_thread().name[:0]]\n'
                        '            assert threading.current_thread() is not threading.main_thread(), "main"') \
        .replace('Worker(["bad"]).start()\n', "")
    out = reduce_with(needs, shows("KeyError: 'bad'"), "call_directly")
    assert out == needs


def test_a_failure_that_needs_the_worker_keeps_it() -> None:
    # Raised only when running in a worker thread: calling it directly passes, so it stays.
    src = '''
import threading

def work():
    if threading.current_thread() is not threading.main_thread():
        raise KeyError("in a worker")

t = threading.Thread(target=work)
t.start()
t.join()
'''
    out = reduce_with(src, shows("KeyError: 'in a worker'"), "call_directly")
    assert "threading.Thread(target=work)" in out


# ---- a pool's or executor's map, where its results are consumed ------------------------------
def _map_rewrites(source: str) -> list[str]:
    from reducer.analysis.cst import replace
    from reducer.passes.direct import _map_sites, map_rewrites
    module = cst.parse_module(source)
    return [replace(module, old, new) for site in _map_sites(module) for old, new in map_rewrites(module, site)]


@pytest.mark.parametrize("before,after", [
    ("for r in executor.map(fn, xs):\n    use(r)\n", "for r in map(fn, xs):\n    use(r)\n"),
    ("out = list(pool.map(fn, xs))\n", "out = [fn(x) for x in xs]\n"),
    ("out = list(pool.map(fn, xs))\n", "out = list(map(fn, xs))\n"),
    ("list(pool.map(fn, [a]))\n", "fn(a)\n"),
    ("out = list(pool.map(fn, [a]))\n", "out = [fn(a)]\n"),
    ("out = list(pool.starmap(fn, pairs))\n", "out = [fn(*x) for x in pairs]\n"),
    ("out = list(pool.starmap(fn, [(a, b)]))\n", "out = [fn(a, b)]\n"),
    ("list(pool.starmap(fn, {'k': v}.items()))\n", "fn('k', v)\n"),
    ("list(pool.map(fn, enumerate([a])))\n", "fn((0, a))\n"),
    ("out = sorted(pool.imap_unordered(fn, xs, 4))\n", "out = sorted(map(fn, xs))\n"),
    ("out = list(ex.map(fn, a, b, timeout=3))\n", "out = [fn(*x) for x in zip(a, b)]\n"),
    ("x = 0\nout = [r for r in pool.imap(fn, xs)]\n", "x = 0\nout = [r for r in map(fn, xs)]\n"),
    ("res = executor.map(fn, xs)\nfor r in res:\n    pass\n", "res = map(fn, xs)\nfor r in res:\n    pass\n"),
])
def test_consumed_maps_become_direct_calls(before: str, after: str) -> None:
    assert after in _map_rewrites(before)


@pytest.mark.parametrize("source", [
    "pool.map(fn, xs)\n",                      # results dropped: an executor never raises there
    "res = executor.map(fn, xs)\n",            # bound to a name nobody reads
    "out = list(map(fn, xs))\n",               # already the builtin
    "out = list(df.map(fn))\n",                # one argument: not a pool's map
])
def test_maps_whose_results_are_not_consumed_are_left_alone(source: str) -> None:
    assert _map_rewrites(source) == []


def test_a_pools_map_returns_its_list_so_the_bare_call_becomes_one() -> None:
    # heldout8's tagger: `tagged = pool.starmap(fn, jobs)` over a name, read later: a Pool's map
    # and starmap build their list themselves (and raise a task's error), so the call is the list
    # comprehension; an executor's map is lazy and stays as the consumed-map rules say
    from reducer.passes.direct import _map_alternatives, _map_sites
    pooled = ("import multiprocessing as mp\n"
              "with mp.get_context('spawn').Pool(2) as pool:\n"
              "    tagged = pool.starmap(fn, jobs)\n"
              "print(tagged)\n")
    module = cst.parse_module(pooled)
    got = [a for site in _map_sites(module) for a in _map_alternatives(module, site)]
    assert any("tagged = [fn(*x) for x in jobs]" in a for a in got), got
    lazy = pooled.replace("mp.get_context('spawn').Pool(2)", "ProcessPoolExecutor(2)").replace("starmap", "map")
    module = cst.parse_module("from concurrent.futures import ProcessPoolExecutor\n" + lazy)
    got = [a for site in _map_sites(module) for a in _map_alternatives(module, site)]
    assert not any("for x in jobs]" in a for a in got), got


def test_a_failure_surfacing_from_executor_map_is_raised_by_direct_calls() -> None:
    src = '''
import configparser
from concurrent.futures import ThreadPoolExecutor

def parse(text):
    configparser.ConfigParser().read_string(text)

with ThreadPoolExecutor(2) as executor:
    for found in executor.map(parse, ["[a]\\nx = 1\\n", "[b]\\ny = 1\\ny = 2\\n"]):
        pass
'''
    out = reduce_with(src, shows("DuplicateOptionError: While reading from '<string>' [line  3]"), "call_directly")
    assert "executor.map" not in out and "map(parse, [" in out


QUEUE_WORKER = '''
import multiprocessing as mp

def worker_loop(requests, limit):
    while True:
        req = requests.get()
        if req is None:
            return
        if len(req) > limit:
            raise ValueError(f"request of {len(req)} tokens exceeds the limit of {limit}")

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=worker_loop, args=(q, 4))
    proc.start()
    q.put("abc")
    q.put("abcdefgh")
    q.put(None)
    proc.join()
'''


def shows_as_file(text: str):
    """Like ``shows``, but the source runs as a script file: a spawned child re-imports it."""
    import subprocess
    import sys
    import tempfile

    def predicate(source: str) -> bool:
        with tempfile.TemporaryDirectory() as tmp:
            path = f"{tmp}/worker.py"
            with open(path, "w") as fh:
                fh.write(source)
            try:
                proc = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=20)
            except subprocess.TimeoutExpired:
                return False        # a candidate that hangs (a target waiting for work) is no repro
        return text in proc.stderr
    return predicate


def test_bring_home_calls_a_spawned_target_where_the_parent_joins_it() -> None:
    """Called where the process was created, the target would wait on a queue nobody has filled
    yet; where the parent joins it, the requests are there and the failure shows in-process."""
    target = shows_as_file("ValueError: request of 8 tokens exceeds the limit of 4")
    assert target(QUEUE_WORKER)            # the original fails in its child
    out = reduce_with(QUEUE_WORKER, target, "bring_home")
    assert "worker_loop(q, 4)" in out and "proc.start()" not in out and "proc.join()" not in out
    start, put, call = out.index("ctx.Process"), out.index('q.put(None)'), out.index("worker_loop(q, 4)")
    assert start < put < call


def test_bring_home_keeps_the_child_when_the_failure_needs_it() -> None:
    src = QUEUE_WORKER.replace("if len(req) > limit:", "if len(req) > limit and mp.parent_process() is not None:")
    target = shows_as_file("ValueError: request of 8 tokens")
    assert target(src)
    out = reduce_with(src, target, "bring_home")
    assert out.strip() == src.strip()


def test_bring_home_calls_the_target_before_the_parent_reads_its_results() -> None:
    """The spawn worker's shape: the parent feeds a queue, then waits on the results queue before
    it joins the child. At the join the target would never run; right after the last hand-off it
    finds the requests in place."""
    src = QUEUE_WORKER.replace("def worker_loop(requests, limit):", "def worker_loop(requests, results, limit):") \
        .replace("            return\n", "            return\n        results.put(len(req))\n") \
        .replace("    q = ctx.Queue()\n", "    q = ctx.Queue()\n    r = ctx.Queue()\n") \
        .replace("args=(q, 4)", "args=(q, r, 4)") \
        .replace("    q.put(None)\n", "    q.put(None)\n    print(r.get(timeout=30))\n")
    target = shows_as_file("ValueError: request of 8 tokens exceeds the limit of 4")
    assert target(src)
    out = reduce_with(src, target, "bring_home")
    assert "worker_loop(q, r, 4)" in out and "proc.start()" not in out, out
    assert out.index('q.put(None)') < out.index("worker_loop(q, r, 4)") < out.index("r.get(timeout=30)")


def test_bring_home_at_the_start_drops_the_join_when_results_are_read_before_it() -> None:
    """The LoRA spawn worker's shape: the work is queued before the child starts, and the parent
    reads results before it joins. Called at the start (the join dropped: a process never
    started cannot be joined), the target sees its work and the parent its results."""
    src = QUEUE_WORKER.replace("def worker_loop(requests, limit):", "def worker_loop(requests, results, limit):") \
        .replace("            return\n", "            results.put(None)\n            return\n") \
        .replace("    q = ctx.Queue()\n", "    q = ctx.Queue()\n    r = ctx.Queue()\n") \
        .replace("args=(q, 4)", "args=(q, r, 4)") \
        .replace("    proc.start()\n", "") \
        .replace("    q.put(None)\n", "    q.put(None)\n    proc.start()\n    print(r.get(timeout=10))\n")
    target = shows_as_file("ValueError: request of 8 tokens exceeds the limit of 4")
    assert target(src)
    out = reduce_with(src, target, "bring_home")
    assert "worker_loop(q, r, 4)" in out and "proc.start()" not in out and "proc.join()" not in out, out
    assert out.index('q.put(None)') < out.index("worker_loop(q, r, 4)") < out.index("r.get(timeout=10)")


def test_bring_home_runs_a_four_argument_target_even_when_that_is_larger() -> None:
    """Issue #38: the target takes four arguments (a queue, two from argparse, a dict), so the
    call in the parent is more tokens than the start and join it replaces. It removes a process,
    which the size order counts first (reducer/analysis/size.py), so it is run and kept; the old order
    refused it without a run."""
    src = QUEUE_WORKER.replace("def worker_loop(requests, limit):",
                               "def worker_loop(requests, limit, margin_tokens_allowed, settings_by_mode):") \
        .replace("import multiprocessing as mp\n", "import argparse\nimport multiprocessing as mp\n") \
        .replace("        if len(req) > limit:", "        if len(req) > limit + margin_tokens_allowed + settings_by_mode['strict']:") \
        .replace("    ctx = mp.get_context", "    parser = argparse.ArgumentParser()\n"
                 "    parser.add_argument('--limit', type=int, default=4)\n"
                 "    parser.add_argument('--margin', type=int, default=0)\n"
                 "    args = parser.parse_args()\n    ctx = mp.get_context") \
        .replace("args=(q, 4)", "args=(q, args.limit, args.margin, {'strict': 0, 'lenient': 2})") \
        .replace("proc.join()", "proc.join(timeout=60)")
    target = shows_as_file("ValueError: request of 8 tokens exceeds the limit of 4")
    assert target(src)
    from reducer.analysis.size import size_of
    call = "worker_loop(q, args.limit, args.margin, {'strict': 0, 'lenient': 2})"
    home = src.replace("    proc.start()\n", "").replace("    proc.join(timeout=60)\n", f"    {call}\n")
    assert size_of(home).tokens > size_of(src).tokens and size_of(home) < size_of(src)
    out = reduce_with(src, target, "bring_home")
    assert call in out and "proc.start()" not in out, out


POOL_WITH_INITIALIZER = '''
import concurrent.futures as cf
import multiprocessing as mp

_state = {}


def load(path, threads):
    _state["model"] = {"path": path, "threads": threads}


def work(batch):
    return _state["model"]["path"] + batch[3]


if __name__ == "__main__":
    with cf.ProcessPoolExecutor(2, mp.get_context("spawn"), load, ("ckpt", 1)) as pool:
        print(pool.submit(work, ["a"]).result())
'''


@pytest.mark.parametrize("spelling", ["positional", "keywords", "bound"])
def test_a_pool_initializer_is_called_before_the_task_brought_home(spelling: str) -> None:
    # The worker runs `load("ckpt", 1)` before any task: the task called in the parent without it
    # raises KeyError instead of the IndexError; with it first, the child process goes.
    src = POOL_WITH_INITIALIZER
    if spelling == "keywords":
        src = src.replace('cf.ProcessPoolExecutor(2, mp.get_context("spawn"), load, ("ckpt", 1))',
                          'cf.ProcessPoolExecutor(max_workers=2, initializer=load, initargs=("ckpt", 1))')
    if spelling == "bound":
        src = src.replace('    with cf.ProcessPoolExecutor(2, mp.get_context("spawn"), load, ("ckpt", 1)) as pool:\n'
                          '        print(',
                          '    pool = mp.Pool(2, load, ("ckpt", 1))\n    if pool:\n        print(')
        src = src.replace("pool.submit(work, [\"a\"]).result()", "pool.apply(work, ([\"a\"],))")
    out = reduce_with(src, shows("IndexError: list index out of range"), "bring_home")
    assert "load('ckpt', 1)\n" in out or 'load("ckpt", 1)\n' in out
    assert "work([\"a\"])" in out or "work(['a'])" in out
    assert ".submit(" not in out and ".apply(" not in out


# ---- a job whose ranks take their place as arguments, brought home as rank 0 of a world of one ----
RANK_JOB = '''
import multiprocessing as mp
import os
import sys
import tempfile
import time

def rendezvous(folder, rank, world, rows):
    # what a process group's init does: wait until every rank has joined; here it also
    # tells each rank the others' shard sizes
    with open(os.path.join(folder, f"rank{rank}"), "w") as fh:
        fh.write(str(rows))
    deadline = time.time() + 15
    while len(os.listdir(folder)) < world:
        if time.time() > deadline:
            raise TimeoutError("peers never joined")
        time.sleep(0.05)
    time.sleep(0.2)
    return [int(open(os.path.join(folder, f)).read()) for f in sorted(os.listdir(folder))]

def run_rank(rank, world, folder, shard, opts):
    sizes = rendezvous(folder, rank=rank, world=world, rows=len(shard))
    if opts["same_sizes"] and len(set(sizes)) > 1:
        raise ValueError(f"shard sizes differ across ranks: {sizes}")
    if len(shard) % opts["batch"]:
        raise ValueError(f"shard of {len(shard)} rows does not split into batches of {opts['batch']}")

if __name__ == "__main__":
    world = int(os.environ.get("RANKS", "2"))
    folder = tempfile.mkdtemp()
    shards = [list(range(5 + 0 * r)) for r in range(world)]
    ctx = mp.get_context("spawn")
    procs = []
    for r in range(world):
        p = ctx.Process(target=run_rank, args=(r, world, folder, shards[r], {"batch": 2, "same_sizes": True}))
        p.start()
        procs.append(p)
    for p in procs:
        p.join()
    sys.exit(max(p.exitcode for p in procs))
'''


def test_bring_home_calls_one_rank_as_rank_0_of_a_world_of_one() -> None:
    """Issue #38: a Process per rank whose rank and world size are arguments. Called in place
    with the world it was given, the target would wait for a peer that never starts; as rank 0
    of one it joins at once and raises in the parent, and the start/join loops go."""
    target = shows_as_file("ValueError: shard of 5 rows does not split into batches of 2")
    assert target(RANK_JOB)
    out = reduce_with(RANK_JOB, target, "bring_home")
    assert 'run_rank(0, 1, folder, shards[0], {"batch": 2, "same_sizes": True})' in out, out
    assert "p.start()" not in out and "p.join()" not in out and "ctx.Process" not in out


def test_bring_home_calls_the_second_rank_with_its_place_in_the_group_made_0_of_1() -> None:
    """Only rank 1's shard fails: rank 0 alone passes, so rank 1 comes home, its data still
    rank 1's and its place in the group (every ``rank=`` keyword) 0 of 1."""
    src = RANK_JOB.replace("5 + 0 * r", "4 + r").replace('"same_sizes": True', '"same_sizes": False')
    target = shows_as_file("ValueError: shard of 5 rows does not split into batches of 2")
    assert target(src)
    out = reduce_with(src, target, "bring_home")
    assert 'run_rank(1, 1, folder, shards[1], {"batch": 2, "same_sizes": False})' in out, out
    assert "rendezvous(folder, rank=0, world=world, rows=len(shard))" in out and "ctx.Process" not in out


def test_bring_home_keeps_the_ranks_when_the_failure_needs_a_peer() -> None:
    """The shards differ across ranks: no rank alone sees that, so the ranks stay."""
    src = RANK_JOB.replace("5 + 0 * r", "4 + r")
    target = shows_as_file("ValueError: shard sizes differ across ranks: [4, 5]")
    assert target(src)
    out = reduce_with(src, target, "bring_home")
    assert out.strip() == src.strip()


@pytest.mark.parametrize("before, after", [
    ("mp.spawn(worker, args=(args.world_size, args, cfg), nprocs=args.world_size, join=True)",
     "worker(0, 1, args, cfg)"),
    ("torch.multiprocessing.start_processes(worker, (n, vocab), n, start_method='fork')",
     "worker(0, 1, vocab)"),
    ("procs = [ctx.Process(target=run, args=(r, world, shards[r]), kwargs={'rank': r}) for r in range(world)]",
     "run(0, 1, shards[0], **{'rank': 0})\nprocs = []"),
])
def test_rank_homes_write_rank_0_of_one(before: str, after: str) -> None:
    from reducer.passes.ranks import rank_homes
    homes = rank_homes(before + "\n")
    assert homes and homes[0].strip() == after, homes


def test_rank_homes_leave_an_attribute_named_like_the_rank_alone() -> None:
    from reducer.passes.ranks import rank_homes
    src = "for r in range(n):\n    p = Process(target=f, args=(r, cfg.r, n))\n    p.start()\n"
    assert rank_homes(src) == ["f(0, cfg.r, 1)\n"]
