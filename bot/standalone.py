"""The last step of `reduce`: make repro.py self-contained and verify it the way a maintainer
will run it, saved alone as repro.py in an empty folder with the Hub offline
(reducer/standalone.py). reduction.json says how it was verified (``verified``) and what it
still reads from the user's disk (``needs``); the draft's steps to reproduce follow both."""
from __future__ import annotations

from typing import Any

from rich.markup import escape

from bot.output import console
from bot.scrub import scrub
from bot.store import ReproDir, write_json_atomic, write_text_atomic
from reducer.artefacts import Context, default_shared
from reducer.errors import DeadlineReached
from reducer.failure import Failure
from reducer.oracle import Oracle
from reducer.outcome import TracebackRecord
from reducer.signature import find_match
from reducer.standalone import Standalone, make_standalone, probe_in


def context_of(failure: Failure) -> Context:
    runner = failure.runner
    return Context(script=failure.spec.script.resolve(), env=runner.base_environment(),
                   argv=tuple(runner.spec.args), shared=default_shared(runner.python))


def alone_runner(failure: Failure, oracle: Oracle):
    def run_alone(source: str) -> TracebackRecord | None:
        # On the GPU set the failure was confirmed on, like every other final check.
        verdict = oracle.test(source, warm=False, alone=True, gpu_set=failure.gpu.set or None)
        return find_match(verdict.outcome.tracebacks, failure.signature, failure.spec.options,
                          as_itself=failure.as_itself, raised=failure.raised)
    return run_alone


def make_self_contained(failure: Failure, repro: ReproDir, oracle: Oracle, best: str,
                        record: TracebackRecord) -> tuple[str, TracebackRecord]:
    """repro.py with the artefacts it read rewritten as code where a run shows that keeps the
    failure; the traceback of its alone run (or, when it cannot be made to fail alone, of the
    cold run beside its files)."""
    from reducer.run.runner import OFFLINE_ENV
    probe = probe_in(failure.runner.python, {**failure.runner.base_environment(), **OFFLINE_ENV})
    try:
        result = make_standalone(best, context_of(failure), alone_runner(failure, oracle), probe,
                                 private=lambda text: bool(scrub(text).findings))
    except DeadlineReached:
        result = Standalone(best, None, attempts=[{"stopped": "time limit"}])
    if result.source != best:
        write_text_atomic(repro.repro, result.source)
    record_verification(repro, result)
    say(result)
    return (result.source, result.record) if result.record is not None else (best, record)


def record_verification(repro: ReproDir, result: Standalone) -> None:
    data: dict[str, Any] = repro.read_json(repro.reduction_json) if repro.reduction_json.is_file() else {}
    data["verified"] = result.verified
    data["needs"] = result.needs
    data["standalone"] = {"attempts": result.attempts, "fails_alone": result.record is not None}
    write_json_atomic(repro.reduction_json, data)


def say(result: Standalone) -> None:
    kept = [a for a in result.attempts if a.get("fails_the_same_way")]
    if kept:
        console.print("self-contained: " + "; ".join(escape(f"{a['artefact']} ({a['how']})") for a in kept))
    if result.verified == "alone, offline":
        console.print("verified: repro.py alone in an empty folder, offline, fails the same way")
    elif result.needs:
        console.print("[yellow]repro.py still reads local files a maintainer will not have:[/] "
                      + ", ".join(escape(n["path"]) for n in result.needs))
    else:
        console.print("[yellow]repro.py does not fail the same way alone in an empty folder, offline: "
                      "verified beside the script's own files only[/]")
