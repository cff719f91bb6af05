"""The search driver: the gate, 1-minimality, determinism with --jobs, cache, time bound,
interrupt and resume. Pure-Python oracles for speed, and a real-subprocess oracle."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from reducer.analysis.cst import parses
from reducer.analysis.size import normalize, size_of
from reducer.passes import BY_NAME
from reducer.search.driver import Reducer
from reducer.search.judge import candidate_key
from reducer.search.scheduler import RunClock
from tests.reducer_support import SubprocessOracle, raises, reduce_with

DATA = Path(__file__).parent / "data" / "reducer"

SCRIPT = '''import json
import os
import sys

SETTINGS = {"mode": "strict", "retries": 3, "verbose": False}


def load(text, strict=True):
    if strict:
        return json.loads(text)
    return {}


def helper(a, b):
    return a + b


def main():
    total = helper(1, 2)
    print("total", total)
    for attempt in range(SETTINGS["retries"]):
        if attempt == 0:
            load("{bad", strict=SETTINGS["mode"] == "strict")
    return total


if __name__ == "__main__":
    main()
'''

ORACLE = raises(ValueError, "Expecting property name")


def _all_single_deletions(source: str) -> list[str]:
    """Every candidate that deletes exactly one statement or one call argument."""
    from reducer.analysis.cst import parse, replace
    from reducer.passes.arguments import _set_args, calls
    from reducer.passes.statements import blocks_by_depth
    m = parse(source)
    out = []
    for b in blocks_by_depth(m):
        for i in range(len(b.body)):
            out.append(replace(m, b, b.with_changes(body=list(b.body[:i]) + list(b.body[i + 1:]))))
    for c in calls(m):
        for i in range(len(c.args)):
            out.append(replace(m, c, _set_args(c, list(c.args[:i]) + list(c.args[i + 1:]))))
    return [o for o in out if isinstance(o, str)]


def test_reduces_and_result_is_one_minimal() -> None:
    result = Reducer(SCRIPT, ORACLE).run()
    assert result.stats.status == "done"
    assert result.best_source == 'import json\n\njson.loads("{")\n'
    assert ORACLE(result.best_source)
    for candidate in _all_single_deletions(result.best_source):
        assert not (parses(candidate) and ORACLE(candidate)), candidate


def test_one_minimal_on_a_result_that_keeps_structure() -> None:
    # a failure that needs a loop, a call with several args and a guard: no pass may break it
    src = ("import json\nclass Box:\n    def __init__(self, v, w=0):\n        self.v = v\n        self.w = w\n"
           "items = [Box(1, w=2), Box(2), Box(3)]\nfor it in items:\n    if it.v == 2:\n"
           "        json.loads('{' * it.w)\n")
    oracle = raises(ValueError, "Expecting value")
    result = Reducer(src, oracle, format_result=False).run()
    best = result.best_source
    assert oracle(best)
    for candidate in _all_single_deletions(best):
        assert not (parses(candidate) and oracle(candidate)), candidate


def test_gate_order_cache_and_invalid() -> None:
    runs = []

    def oracle(s: str) -> bool:
        runs.append(s)
        return "keep" in s

    r = Reducer("keep = 1\nother = 2\n", oracle, passes=[])
    assert r.consider("keep = 1\nother = 2\nmore = 3\n") is False    # larger: never run
    assert r.consider("keep = 1\nother = 2\n") is False              # equal: never run
    assert r.consider("keep = (\n") is False                         # unparseable: never run
    assert runs == []
    assert r.consider("other = 2\n") is False
    assert r.consider("other = 2\n\n\n") is False                    # same normalised source: cache
    assert len(runs) == 1 and r.stats.cache_hits == 1
    assert r.consider("keep = 1\n") is True and r.best == "keep = 1\n"
    ps = r.stats.passes["setup"]
    assert (ps.proposed, ps.tried, ps.accepted, ps.not_smaller, ps.invalid) == (6, 2, 1, 2, 1)


def test_jobs_give_the_same_result_as_one_job() -> None:
    serial = Reducer(SCRIPT, ORACLE, jobs=1).run()
    parallel = Reducer(SCRIPT, ORACLE, jobs=4).run()
    assert parallel.best_source == serial.best_source
    assert parallel.stats.accepted == serial.stats.accepted
    assert parallel.stats.runs >= serial.stats.runs      # speculation may run more, never decide differently


@pytest.mark.slow
def test_real_subprocess_oracle_with_jobs_is_deterministic() -> None:
    src = (DATA / "worker_long.py").read_text()
    head = src[: src.index("class DataModule")]    # a shorter script keeps this test fast
    script = head + 'build = json.loads(MODEL_REGISTRY["tiny-gemma"]["adapter_json"][:-1])\n'
    oracle = SubprocessOracle.for_source(script, timeout=10.0)
    a = Reducer(script, oracle, jobs=1).run()
    b = Reducer(script, SubprocessOracle(oracle.target, timeout=10.0), jobs=2).run()
    assert a.best_source == b.best_source
    assert oracle(a.best_source)
    assert size_of(a.best_source).tokens < 20
    assert a.stats.runs == oracle.runs - 1


def test_max_time_stops_with_best_so_far() -> None:
    def slow(s: str) -> bool:
        time.sleep(0.05)
        return ORACLE(s)

    t0 = time.monotonic()
    result = Reducer(SCRIPT, slow, max_time=0.3).run()
    assert time.monotonic() - t0 < 2.0
    assert result.stats.status == "timeout"
    assert ORACLE(result.best_source)
    assert size_of(result.best_source) <= size_of(SCRIPT)


def test_interrupt_keeps_best_and_resume_finishes() -> None:
    accepted: list[str] = []
    calls = [0]

    def oracle(s: str) -> bool:
        calls[0] += 1
        if calls[0] == 6:
            raise KeyboardInterrupt
        return ORACLE(s)

    first = Reducer(SCRIPT, oracle, on_accept=lambda src, stats: accepted.append(src)).run()
    assert first.stats.status == "interrupted"
    assert accepted and first.best_source == accepted[-1]
    assert ORACLE(first.best_source)
    saved = first.stats.to_dict()
    resumed = Reducer(first.best_source, ORACLE, seen=first.seen, stats=saved).run()
    assert resumed.stats.status == "done"
    assert resumed.best_source == Reducer(SCRIPT, ORACLE).run().best_source
    assert resumed.stats.size_before == saved["size_before"]       # still measured from the original
    assert resumed.stats.runs > saved["runs"]


def test_progress_and_stats_shape() -> None:
    events = []
    result = Reducer(SCRIPT, ORACLE, on_progress=events.append).run()
    assert events and events[-1].size_now <= events[0].size_start
    d = result.stats.to_dict()
    assert d["size_before"]["tokens"] > d["size_after"]["tokens"]
    assert d["statements_after"] == 2
    assert set(d["passes"]["delete_statements"]) >= {"proposed", "tried", "accepted", "cache_hits", "seconds"}
    assert d["runs"] == sum(p["tried"] for p in d["passes"].values())


def test_normalised_key_ignores_layout_only() -> None:
    assert normalize("x = 1   \n\n\ny = 2\n") == normalize("x = 1\ny = 2")
    assert normalize("x = 1\n") != normalize("x = 2\n")


def test_single_pass_driver_helper() -> None:
    assert reduce_with("a = 1\nb = 2\nraise KeyError(b)\n", raises(KeyError, "2"), "delete_statements") == \
        "b = 2\nraise KeyError(b)\n"
    assert "delete_statements" in BY_NAME


@pytest.mark.slow
def test_long_worker_script_reduces_to_two_statements() -> None:
    """The 228-line worker (argparse, registries, dataclass, classes, a loop that logs and
    swallows) ends as the two statements that matter, with the first cut and recorded values."""
    from reducer.analysis.trace import subprocess_run_fn, trace_run
    src = (DATA / "worker_long.py").read_text()
    oracle = SubprocessOracle.for_source(src, timeout=10.0)
    t0 = time.monotonic()
    trace = trace_run(src, subprocess_run_fn())
    result = Reducer(src, oracle, jobs=2, trace=trace).run()
    assert result.best_source == "import json\n\njson.loads('{')\n"
    stats = result.stats
    # the figures for the notes; `pytest -s -k long_worker` shows them
    print(f"\nworker_long.py: {stats.statements_before} -> {stats.statements_after} statements, "
          f"{stats.size_before['tokens']} -> {stats.size_after['tokens']} tokens, {stats.runs} runs "
          f"(+1 traced), {stats.cache_hits} cache hits, {time.monotonic() - t0:.1f}s")
    assert stats.statements_before > 140 and stats.statements_after == 2
    assert stats.passes["first_cut"].accepted == 1
    assert stats.passes["recorded_values"].accepted >= 1
    # runs made ahead on otherwise idle slots and never needed are not the search's cost
    assert stats.runs - stats.speculative_unused < 400, (stats.runs, stats.speculative_unused)


def test_unparseable_script_is_a_clear_error() -> None:
    from reducer.errors import ExitCode, ReprobotError
    with pytest.raises(ReprobotError) as e:
        Reducer("def f(:\n", ORACLE)
    assert e.value.exit_code == ExitCode.NOT_PYTHON
    assert "cannot parse" in e.value.message


def test_a_crashing_pass_is_recorded_and_the_rest_still_run() -> None:
    from reducer.passes import Pass

    def broken(gate) -> None:
        raise RuntimeError("bug in a pass")

    result = Reducer(SCRIPT, ORACLE, passes=[Pass("broken", broken), BY_NAME["delete_statements"]]).run()
    assert result.stats.status == "done"
    errors = result.stats.passes["broken"].errors
    assert errors[0] == "RuntimeError: bug in a pass" and len(errors) <= 5      # once per round, bounded
    assert result.stats.passes["delete_statements"].accepted > 0


def test_final_layout_is_verified_by_a_run() -> None:
    src = 'x = 1\n\n\nimport json\njson.loads("{" * x)\n'
    hoisted = Reducer(src, ORACLE, passes=[]).run()
    assert hoisted.best_source == 'import json\n\nx = 1\njson.loads("{" * x)\n'
    assert hoisted.stats.passes["format"].tried == 1

    def no_leading_import(s: str) -> bool:      # an oracle for which hoisting "breaks" the repro
        return ORACLE(s) and not s.startswith("import")

    kept = Reducer(src, no_leading_import, passes=[]).run()
    assert kept.best_source == 'x = 1\nimport json\njson.loads("{" * x)\n'
    assert kept.stats.passes["format"].tried == 2


def test_oracle_and_callback_errors_propagate_with_best_kept() -> None:
    def broken_save(src: str, stats: dict) -> None:
        raise OSError("disk full")

    r = Reducer(SCRIPT, ORACLE, on_accept=broken_save)
    with pytest.raises(OSError, match="disk full"):
        r.run()
    assert r.stats.status == "error" and ORACLE(r.best)


def test_a_slow_candidate_does_not_hold_the_other_slots() -> None:
    """With two slots, the candidates after a slow one keep running on the free slot: the slow
    run only ends once three later candidates have run beside it (with one barrier per batch
    of two it would wait for its batch partner alone, and time out here)."""
    import threading
    started_beside: list[str] = []
    three_ran = threading.Event()
    slow_saw_them: list[bool] = []

    def oracle(source: str) -> bool:
        if source.startswith("slow"):
            slow_saw_them.append(three_ran.wait(timeout=10))
            return False
        started_beside.append(source)
        if len(started_beside) >= 3:
            three_ran.set()
        return source.startswith("x3")

    r = Reducer("a = 1\nb = 2\nc = 3\nd = 4\n", oracle, jobs=2)
    try:
        tag = r.first([(n, f"{name} = 0\n") for n, name in enumerate(["slow", "x1", "x2", "x3", "x4"])])
    finally:
        r.close()
    assert slow_saw_them == [True] and started_beside[:3] == ["x1 = 0\n", "x2 = 0\n", "x3 = 0\n"]
    # the verdicts are still read in order: the slow one first, then the first that reproduces
    assert tag == 3 and r.best == "x3 = 0\n"


def test_idle_slots_run_the_next_pass_ahead_and_the_result_does_not_change() -> None:
    """A pass with one candidate (offered through consider) leaves a slot idle: the next pass's
    first candidate runs beside it. The accepted sequence is the one a single slot gives."""
    import threading
    from reducer.passes.base import Pass

    first_started = threading.Event()
    overlapped: list[bool] = []

    def one_candidate(gate) -> None:
        gate.consider("a = 1\nb = 2\n")

    def drop_lines(gate) -> None:
        lines = gate.best.splitlines(keepends=True)
        gate.first((i, "".join(lines[:i] + lines[i + 1:])) for i in range(len(lines)))

    def oracle(source: str) -> bool:
        if source == "a = 1\nb = 2\n":
            first_started.set()
            time.sleep(0.4)     # the slow single candidate
        elif source.startswith("b = 2") or source == "a = 1\nb = 2\nc = 3\n":
            overlapped.append(first_started.is_set())
        time.sleep(0.25)
        return "b = 2" in source

    passes = [Pass("one", one_candidate), Pass("drop", drop_lines)]
    results = []
    for jobs in (1, 2):
        overlapped.clear()
        first_started.clear()
        r = Reducer("a = 1\nb = 2\nc = 3\n", oracle, jobs=jobs, passes=passes, format_result=False)
        r.scheduler.run_time = RunClock(1.0, 1)      # as if runs were known to be slow
        results.append((r.run().best_source, r.stats.accepted))
        if jobs == 2:
            assert r.stats.speculated >= 1
            assert any(overlapped), "the next pass's candidate did not run beside the slow one"
    assert results[0] == results[1] == ("b = 2\n", 2)


def test_a_time_limit_keeps_a_reserve_and_the_best_is_still_laid_out() -> None:
    """Stopped by --max-time, the best is still formatted (imports first), inside the limit."""
    from reducer.passes.base import Pass

    def never_done(gate) -> None:
        while True:         # a pass still computing candidates (none smaller) when time is up
            gate.consider(gate.best + "\n")

    def oracle(source: str) -> bool:
        time.sleep(0.3)
        return "raise KeyError" in source

    src = "x = 1\nimport json\nraise KeyError(json.__name__)\n"
    start = time.monotonic()
    result = Reducer(src, oracle, max_time=4.0, passes=[Pass("never_done", never_done)]).run()
    took = time.monotonic() - start
    assert result.stats.status == "timeout"
    assert result.best_source == "import json\n\nx = 1\nraise KeyError(json.__name__)\n", result.best_source
    assert result.stats.passes["format"].accepted == 1
    assert took < 4.0 + 0.5, took


def test_the_next_probes_of_a_growing_deletion_run_side_by_side_and_the_result_does_not_change() -> None:
    """Deleting a long run of statements grows by doubling, then bisects: with slow runs and
    idle slots, the probes that may come next run beside the one being decided. The statements
    deleted and the accepted sequence are those of a single slot."""
    import threading

    from reducer.passes import BY_NAME

    src = "".join(f"x{i} = {i}\n" for i in range(40)) + "raise KeyError('k')\n"
    lock, running, most = threading.Lock(), [0], [0]

    def oracle(source: str) -> bool:
        # only the growth probes past the linear four are counted: 8 or more statements deleted,
        # the first three still there
        late = source.count(" = ") <= 40 - 8 and all(f"x{i} = {i}" in source for i in range(3))
        with lock:
            running[0] += late
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= late
        return "raise KeyError('k')" in source and "x3 = 3" in source

    results = []
    for jobs in (1, 4):
        most[0] = 0
        r = Reducer(src, oracle, jobs=jobs, passes=[BY_NAME["delete_statements"]], prelude=[], format_result=False)
        r.scheduler.run_time = RunClock(100.0, 1)    # as if runs were known to be slow (all through the search)
        result = r.run()
        results.append((result.best_source, result.stats.accepted))
        if jobs == 4:
            assert most[0] >= 2, "no doubling or bisection probes ran side by side"
    assert results[0] == results[1] and results[0][0] == "x3 = 3\nraise KeyError('k')\n"


def test_runs_made_ahead_are_stopped_when_a_new_best_makes_them_useless() -> None:
    """Four slots take a pass's first four candidates; the first is accepted at once. The other
    three were computed from the old best and can never be offered again: they are stopped (the
    oracle is handed its run's cancel event), their verdicts are not recorded, and the search goes on
    without waiting for them. The result is the single slot's."""
    from reducer.passes.base import Pass

    stopped: list[str] = []

    def drop_lines(gate) -> None:
        while True:
            lines = gate.best.splitlines(keepends=True)
            if gate.first((i, "".join(lines[:i] + lines[i + 1:])) for i in range(len(lines))) is None:
                return

    def oracle(source: str, cancel: threading.Event | None = None) -> bool:
        keep = "raise KeyError" in source and "keep = 1" in source
        if source != "a = 1\nraise KeyError('k')\n":
            time.sleep(0.05)
            return keep
        # the one candidate a single slot never runs (computed from the old best): slow, unless
        # its run is stopped
        if cancel is not None and cancel.wait(5.0):
            stopped.append(source)
        return False

    src = "a = 1\nkeep = 1\nraise KeyError('k')\n"
    results = []
    for jobs in (1, 4):
        stopped.clear()
        start = time.monotonic()
        r = Reducer(src, oracle, jobs=jobs, passes=[Pass("drop", drop_lines)], prelude=[], format_result=False)
        r.scheduler.run_time = RunClock(100.0, 1)
        result = r.run()
        took = time.monotonic() - start
        results.append(result.best_source)
        if jobs == 4:
            assert result.stats.cancelled >= 1 and stopped, "no run made ahead was stopped"
            assert took < 5.0, took
            # a stopped run's verdict is not in the seen-set
            assert all(candidate_key(s) not in result.seen for s in stopped)
    assert results[0] == results[1] == "keep = 1\nraise KeyError('k')\n"


def test_deletions_in_small_owners_run_side_by_side_across_owners() -> None:
    """remove_arguments on many calls of one argument each: an owner-by-owner walk has one
    candidate at a time; offered owner after owner, four slots are busy. Same result."""
    import threading

    from reducer.passes import BY_NAME

    src = "".join(f"print({i})\n" for i in range(12)) + "raise KeyError(int('7'))\n"
    lock, running, most = threading.Lock(), [0], [0]

    def oracle(source: str) -> bool:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return "raise KeyError(int('7'))" in source and "print(3)" in source

    results = []
    for jobs in (1, 4):
        most[0] = 0
        r = Reducer(src, oracle, jobs=jobs, passes=[BY_NAME["remove_arguments"]], prelude=[], format_result=False)
        r.scheduler.run_time = RunClock(100.0, 1)
        result = r.run()
        results.append((result.best_source, result.stats.accepted))
        if jobs == 4:
            assert most[0] >= 3, most[0]
    assert results[0] == results[1]
    assert "print(3)" in results[0][0] and "print()" in results[0][0]


def test_libcsts_parse_is_checked_when_a_candidate_is_accepted(monkeypatch) -> None:
    """A candidate that compiles is run without libcst's parse (the judge's largest cost per
    candidate); one that reproduces but that libcst cannot read is refused at acceptance, and the
    next one is taken."""
    from reducer.passes.base import Pass
    from reducer.search import judge

    unreadable = "x = 2\nraise KeyError('k')\n"
    real = judge.libcst_parses
    parsed: list[str] = []

    def libcst_parses(source: str) -> bool:
        parsed.append(source)
        return source != unreadable and real(source)

    monkeypatch.setattr(judge, "libcst_parses", libcst_parses)
    ran: list[str] = []

    def oracle(source: str) -> bool:
        ran.append(source)
        return "raise KeyError" in source

    def offer(gate) -> None:
        gate.first(enumerate(["x = 1\n", unreadable, "raise KeyError('k')\n"]))

    src = "x = 1\ny = 2\nraise KeyError('k')\n"
    r = Reducer(src, oracle, passes=[Pass("offer", offer)], prelude=[], format_result=False)
    result = r.run()
    assert unreadable in ran                                   # it ran: it compiles
    assert "x = 1\n" not in parsed                             # a refused candidate was never parsed
    assert result.best_source == "raise KeyError('k')\n"
    assert result.stats.passes["offer"].invalid == 1


# ---- the parts, each handed what it uses ------------------------------------------------------
class _Runs:
    """A ``Runs`` (reducer/search/judge.py) that fails on any candidate with a ``raise``."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def verdict(self, source: str, key: str) -> bool:
        self.asked.append(source)
        return "raise" in source

    def read_ahead(self, key: str) -> bool:
        return False


class _Events:
    """The scheduler's ``Events`` (reducer/search/scheduler.py), recorded."""

    def __init__(self) -> None:
        self.log: list[object] = []

    def check_time(self) -> None:
        self.log.append("clock")

    def progress(self) -> None:
        self.log.append("progress")

    def upcoming(self):
        return 0, None

    def accepted(self, source: str) -> None:
        self.log.append(("accepted", source))


def test_the_judge_decides_with_the_runs_it_is_handed() -> None:
    """The judge holds no other part of the search and calls nothing back: handed a candidate's
    check and what to ask for a verdict, it accepts or refuses on its own."""
    from reducer.search.judge import Judge
    from reducer.search.stats import ReductionStats, Tally

    judge, runs = Judge("x = 1\nraise KeyError\n", tally=Tally(ReductionStats())), _Runs()
    assert judge.decide(judge.check("x = 1\n"), runs) is False
    assert judge.decide(judge.check("raise KeyError\n"), runs) is True
    assert judge.best == "raise KeyError\n" and runs.asked == ["x = 1\n", "raise KeyError\n"]
    assert judge.decide(judge.check("raise KeyError\n"), runs) is False     # no longer smaller: no run
    assert runs.asked == ["x = 1\n", "raise KeyError\n"]


def test_the_scheduler_reports_to_the_events_it_is_built_with() -> None:
    """Every candidate goes scheduler -> judge; the clock is asked before the judge looks, and a
    new best is told to the ``Events`` handed to the constructor (the loop, in a search)."""
    from reducer.search.judge import Judge
    from reducer.search.scheduler import Scheduler
    from reducer.search.stats import ReductionStats, Tally

    tally = Tally(ReductionStats())
    events = _Events()
    judge = Judge("x = 1\nraise KeyError\n", tally=tally)
    scheduler = Scheduler(judge, lambda source: "raise" in source, jobs=1, tally=tally, events=events)
    assert scheduler.consider("x = 1\n") is False
    assert events.log == ["clock", "clock", "clock", "progress"]          # refused after a run: no new best
    events.log.clear()
    assert scheduler.consider("raise KeyError\n") is True
    assert events.log == ["clock", "clock", "clock", "progress", ("accepted", "raise KeyError\n")]
    assert judge.best == "raise KeyError\n" and tally.stats.runs == 2
