"""The final word on a search's result: cold runs in a clean folder, on the GPU set the failure was
confirmed on, then alone in an empty folder offline, and, for a flaky failure, the repro's rate.

- ``cold_verdict``: the result must fail the same way cold, must not be heavier than the
  original (a default-sized model brought back) and must still need the GPU set the original
  needed; otherwise the walk goes back through the earlier results (newest first, at most
  ``COLD_FALLBACK_TRIES``) to the newest that passes all three, and at last to the original.
- ``self_contained``: what the repro reads from the user's disk rewritten as code where a run
  alone, offline, shows that keeps the failure (reducer/reduction/standalone.py).
- ``repro_rate``: a flaky original's repro measured cold as many times as the original was.

Run by reducer/engine.py; nothing here prints or writes a folder."""
from __future__ import annotations

from typing import Any, Callable

from reducer.analysis.artefacts import Context, default_shared
from reducer.errors import DeadlineReached
from reducer.failure.flaky import Rate
from reducer.failure.oracle import Oracle, Verdict
from reducer.failure.original import Failure
from reducer.failure.outcome import Outcome, TracebackRecord
from reducer.failure.signature import find_match
from reducer.reduction.standalone import Standalone, make_standalone, probe_in
from reducer.reduction.warm_start import reference_set

# How many earlier results the cold fallback may try before going back to the original: a
# bisection of 2**8 accepted results.
COLD_FALLBACK_TRIES = 8


def cold_rate(failure: Failure, oracle: Oracle, source: str,
              measured: dict[str, Rate] | None = None) -> tuple[Rate, TracebackRecord | None, Outcome | None, Outcome]:
    """A flaky failure's final verification: the result run cold, one run after another, as many
    times as the original was measured, so its rate is known as well as the original's. By the
    oracle's rule, a different failure or a hang stops it at once (the original only ever failed
    this way or passed cleanly); the rate, the target's record and the run that showed it (None
    when no run did), and the last run. A rate measured to the end is kept in ``measured``."""
    assert failure.rate is not None
    hits, record, shown, last = 0, None, None, None
    n = 0
    for n in range(1, max(failure.rate.runs, 1) + 1):
        last = oracle._test_once(source, False, reference_set(failure), None, False).outcome
        match = find_match(last.tracebacks, failure.signature, failure.spec.options,
                           as_itself=failure.as_itself, raised=failure.raised)
        if match is not None and not (last.timed_out and not failure.hangs):
            hits += 1
            if record is None:
                record, shown = match, last
        elif last.tracebacks or last.timed_out or last.returncode != 0:
            return Rate(hits, n), None, None, last
    rate = Rate(hits, n)
    if measured is not None:
        measured[source] = rate
    return rate, record, shown, last  # type: ignore[return-value]


def keeps_needing_gpus(failure: Failure, oracle: Oracle, source: str) -> bool:
    """A failure that needs its GPU set (failure.gpu.needs_gpus) must still not fail the same way
    on the set's first GPU alone, and must not hang there where the original did not."""
    if not failure.gpu.needs_gpus:
        return True
    verdict = oracle.test(source, warm=False, gpu_set=reference_set(failure), gpu_count=1)
    if find_match(verdict.outcome.tracebacks, failure.signature, failure.spec.options,
                  raised=failure.raised) is not None:
        return False
    return failure.gpu.one_gpu_hangs or not verdict.outcome.timed_out


def heavier(outcome: Outcome, failure: Failure) -> bool:
    """More resident memory than the original's heaviest confirmation run, past the sampling's
    noise (the same script measured twice differs by a few MB)."""
    original = max((o.peak_rss for o in failure.outcomes), default=0)
    return original > 0 and outcome.peak_rss > original + max(original // 10, 32 * 1024 ** 2)


def walk_back(earlier: list[str], fails_cold: Callable[[str], tuple[TracebackRecord | None, Outcome]]
              ) -> tuple[str, TracebackRecord, Outcome] | None:
    """The newest of ``earlier`` (accepted results, oldest first) that fails cold, or None, in at
    most COLD_FALLBACK_TRIES cold runs: the newest first (a last step that broke it), then a
    bisection. What breaks a result cold stays in every later one (a vocabulary's ids shrunk
    into duplicates, which only the warm runs' shared hash seeds read the same way every time,
    heldout6's chat service: 130 accepted results after it), so the newest six alone missed it."""
    good: tuple[str, TracebackRecord, Outcome] | None = None
    lo, hi = -1, len(earlier)          # earlier[hi] fails warm only; earlier[lo] fails cold (-1: unknown)
    tries = 0
    while hi - lo > 1 and tries < COLD_FALLBACK_TRIES:
        mid = hi - 1 if tries == 0 else (lo + hi + 1) // 2
        tries += 1
        record, outcome = fails_cold(earlier[mid])
        if record is not None:
            lo, good = mid, (earlier[mid], record, outcome)
        else:
            hi = mid
    return good


def cold_verdict(failure: Failure, oracle: Oracle, best: str, history: list[str],
                 say: Callable[[str], None] = lambda _line: None,
                 measured: dict[str, Rate] | None = None) -> tuple[str, TracebackRecord | None, Outcome | None]:
    """The final word comes from a cold run in a clean directory, on the GPU set the failure was
    confirmed on. If ``best`` only fails warm, is heavier than the original (a default-sized
    model brought back), or no longer needs its GPU set (it fails the same way on one GPU), walk
    back through ``history`` (the accepted results, oldest first, ``best`` last) to the newest
    earlier result that passes all three; ``say`` hears why. The source kept, its cold record
    (None: nothing earlier fails cold) and the run that showed it. ``measured`` collects the
    rates a flaky failure's cold runs measured, by source."""
    lost: list[str] = []

    def fails_cold(source: str) -> tuple[TracebackRecord | None, Outcome]:
        if failure.flaky:
            # one cold run of a 50%-flaky result fails half the time: its rate is measured instead
            _rate, record, shown, last = cold_rate(failure, oracle, source, measured)
            if record is None:
                return None, last
            verdict = Verdict(True, shown)  # type: ignore[arg-type]
        else:
            verdict = oracle.test(source, warm=False, gpu_set=reference_set(failure))
        record = find_match(verdict.outcome.tracebacks, failure.signature, failure.spec.options,
                            as_itself=failure.as_itself, raised=failure.raised)
        if record is not None and heavier(verdict.outcome, failure):
            return None, verdict.outcome
        if record is not None and not keeps_needing_gpus(failure, oracle, source):
            lost.append(source)
            return None, verdict.outcome
        return record, verdict.outcome

    record, outcome = fails_cold(best)
    if record is not None or (oracle.runner.zygotes is None and not lost and not heavier(outcome, failure)):
        return best, record, outcome
    if lost:
        say(f"the result fails the same way on one GPU too (the original needs {failure.gpu.needs_gpus}): "
            f"going back to the last result that needs them")
    elif heavier(outcome, failure):
        say("the result is heavier than the original: going back to the last result that is not")
    else:
        say("the result " + (f"did not fail the same way in {failure.rate.runs} cold runs"
                             if failure.flaky else "fails warm but not cold")
            + ": going back to the last result that fails cold")
    found = walk_back(history[:-1], fails_cold)
    if found is not None:
        return found
    # The original was confirmed on the set, and checked on one GPU, by find_failure.
    if lost and failure.gpu.needs_gpus:
        return failure.source, failure.record, failure.outcomes[0]
    return failure.source, None, None


def context_of(failure: Failure) -> Context:
    runner = failure.runner
    return Context(script=failure.spec.script.resolve(), env=runner.base_environment(),
                   argv=tuple(runner.spec.args), shared=default_shared(runner.python))


def alone_runner(failure: Failure, oracle: Oracle) -> Callable[[str], TracebackRecord | None]:
    def run_alone(source: str) -> TracebackRecord | None:
        # On the GPU set the failure was confirmed on, like every other final check.
        verdict = oracle.test(source, warm=False, alone=True, gpu_set=reference_set(failure))
        return find_match(verdict.outcome.tracebacks, failure.signature, failure.spec.options,
                          as_itself=failure.as_itself, raised=failure.raised)
    return run_alone


def self_contained(failure: Failure, oracle: Oracle, best: str,
                   private: Callable[[str], bool]) -> Standalone:
    """repro.py with the artefacts it read rewritten as code where a run alone, offline, shows
    that keeps the failure (``private``: text never written into it); a time limit met on the way
    keeps ``best`` as it is, verified beside its files."""
    from reducer.run.runner import OFFLINE_ENV
    probe = probe_in(failure.runner.python, {**failure.runner.base_environment(), **OFFLINE_ENV})
    try:
        return make_standalone(best, context_of(failure), alone_runner(failure, oracle), probe, private=private)
    except DeadlineReached:
        return Standalone(best, None, attempts=[{"stopped": "time limit"}])


def repro_rate(failure: Failure, oracle: Oracle, best: str, measured: dict[str, Rate]) -> dict[str, Any] | None:
    """A flaky original's repro, measured cold as many times as the original was (the final
    verification already did unless the self-contained step changed it): reduction.json's
    ``flaky`` — both rates and the sentence the draft states, never a deterministic-looking
    result. A seeded one says which seed made it deterministic. None for a failure that failed
    every time without a seed. Raises DeadlineReached when the time limit comes first."""
    rate = failure.rate
    if rate is None or (rate.deterministic and failure.seed is None):
        return None
    if failure.seed is not None:
        line = (f"deterministic with seed {failure.seed}: the original {rate.words()}; with random seed "
                f"{failure.seed} fixed (the repro's first line) it fails every time")
        return {"original": rate.to_dict(), "seed": failure.seed, "sentence": line}
    after = measured.get(best)
    if after is None:
        after = cold_rate(failure, oracle, best, measured)[0]
    line = f"flaky: the repro {after.words()} (the original {rate.words()})"
    return {"original": rate.to_dict(), "repro": after.to_dict(), "sentence": line}


def unmeasured_rate(failure: Failure) -> dict[str, Any]:
    """A flaky failure whose repro's rate the time limit left unmeasured: the original's only."""
    rate = failure.rate
    assert rate is not None
    line = f"flaky: the original {rate.words()}; the repro's own rate was not measured before the time limit"
    return {"original": rate.to_dict(), "sentence": line}
