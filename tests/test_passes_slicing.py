"""The slicing pass: the failing path straightened and everything it cannot depend on cut, as
one candidate, located by the script's own frames of the run that made the best interesting."""
from __future__ import annotations

import textwrap

from reducer.failure.oracle import Oracle
from reducer.failure.signature import MatchOptions, signature_of
from reducer.passes import BY_NAME
from reducer.passes.slicing import cuts, sliced
from reducer.run.runner import Runner, RunSpec
from reducer.search.driver import Reducer

WORKER = textwrap.dedent("""\
    import logging
    import queue
    logger = logging.getLogger("w")
    REGISTRY = {"a": {"size": 3}, "b": {"size": 4}}
    NOTES = ["unused", "by the failure"]
    def main():
        jobs = queue.Queue()
        results = queue.Queue()
        for name in ["a"]:
            jobs.put(name)
        jobs.put(None)
        while True:
            name = jobs.get()
            if name is None:
                break
            try:
                words = [n.upper() for n in NOTES]
                words.sort()
                spec = REGISTRY[name]
                size = spec["size"]
                table = {}
                table["x"] = size
                label = "-".join(words)
                value = table["missing"]
                results.put(value)
            except Exception as e:
                logger.exception("job failed: %s", e)
                results.put(None)
        done = []
        while not results.empty():
            done.append(results.get())
        return 0
    main()
""")


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if line.strip() == text)


def test_slice_keeps_only_what_the_failing_statement_reads() -> None:
    lines = {_line(WORKER, 'value = table["missing"]')}
    out = sliced(WORKER, lines)
    assert "words" not in out and "label" not in out and "NOTES" not in out
    # the loop exit and the queue feeding it stay: without them the loop would never end
    assert "if name is None:" in out and "jobs.put(None)" in out
    assert 'table["x"] = size' in out and 'spec = REGISTRY[name]' in out
    assert "done = []" not in out
    # the failure is inside main(): the call that runs it stays, the unrelated list goes
    assert out.rstrip().endswith("main()") and "NOTES" not in out


def test_straightened_and_sliced_is_the_boldest_cut() -> None:
    lines = {_line(WORKER, 'value = table["missing"]')}
    bold, straight, plain = cuts(WORKER, lines)
    assert "while True" not in bold and "try:" not in bold and "if name is None" not in bold
    assert bold.index("name = jobs.get()") < bold.index('value = table["missing"]')
    assert "while True" not in straight and "words.sort()" in straight
    assert "while True" in plain and "words" not in plain


def test_slice_pass_with_real_runs(tmp_path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    runner = Runner(RunSpec(script=script, python=__import__("sys").executable, timeout=60))
    target = signature_of(runner.run(WORKER).tracebacks[0])
    oracle = Oracle(runner, target, MatchOptions(), timeout=60)
    assert oracle.test(WORKER).interesting
    # a logged traceback starts at the `try`: the only frame of the script is the failing line
    assert oracle.failure_lines(WORKER) == (_line(WORKER, 'value = table["missing"]'),)
    result = Reducer(WORKER, oracle, passes=[BY_NAME["slice"]], format_result=False).run()
    best = result.best_source
    assert result.stats.passes["slice"].accepted >= 1
    assert "while True" not in best and "words" not in best and "logger.exception" not in best
    assert 'value = table["missing"]' in best
    # one run for the first (boldest) cut, one more round finding nothing left to cut
    assert result.stats.runs <= 3
