"""`reprobot reduce`'s adapter to the engine (reducer/engine.py, which owns a whole reduction:
the warm start, the search, retracing, the cold verdict and the walk back). Here: the repro
folder (what --resume continues from, every accepted step saved, the scrubbed trace, the verified
result and its digest), progress and printing, pinning the environment, and the command's options
mapped to the engine's."""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from rich.markup import escape

from bot.output import console, traceback_tail
from bot.progress import ReductionProgress
from bot.scrub import scrub
from bot.targets.registry import recipe_files
from bot.store import ReproDir, record_failure, write_json_atomic, write_text_atomic
from bot.verified import record_verified, verification
from reducer import engine
from reducer.engine import Note, Reduction
from reducer.errors import ExitCode, ReprobotError
from reducer.failure.original import Failure
from reducer.reduction.standalone import Standalone
from reducer.search.loop import Progress, ReductionResult


@dataclass
class Options:
    """`reduce`'s options (bot/commands/reduce.py); ``engine_options`` maps them to the engine's."""

    jobs: int = 1
    gpus: str | None = None
    jobs_per_gpu: int = 1
    max_time: float | None = None
    deadline: float | None = None     # time.monotonic() at which the whole command stops
    resume: bool = False
    trace: bool = True
    pin_env: bool = True
    warm: bool = True
    cluster: str | None = None        # a Ray address (--cluster): the search's candidates run there
    cluster_slots: int | None = None  # slots to place on it (default: as many as its nodes hold)


# ---- the pipeline --------------------------------------------------------------------------
def reduce_failure(failure: Failure, repro: ReproDir, opts: Options | None = None, **kwargs: Any) -> int:
    """Reduce ``failure`` into ``repro``; 0 when the result fails the same way cold. Stopping
    early (interrupted, time limit) or a result that only fails sometimes raises ReprobotError,
    with the best result so far saved."""
    opts = opts or Options(**kwargs)
    if opts.resume and finished(repro):
        return 0
    result = engine.reduce(failure, engine_options(opts, repro), Folder(repro))
    if result.stopped == engine.NO_SEARCH:
        raise time_limit(repro)
    if result.stopped == engine.INTERRUPTED:
        console.print(f"[yellow]interrupted:[/] best so far kept in {repro.repro}; "
                      f"`reprobot reduce {failure.spec.script} --resume` continues")
        raise ReprobotError("interrupted; the best result so far is saved", ExitCode.INTERRUPTED)
    if result.stopped == engine.NOT_COLD:
        raise ReprobotError(f"the reduced script did not fail the same way when re-run in a clean "
                            f"directory (flaky?): kept in {repro.repro}", ExitCode.FLAKY)
    if result.stopped == engine.UNVERIFIED:
        # the search ended, its cold check did not: the same one-line stop as at the limit
        # mid-search, never a traceback
        if opts.pin_env:
            # the environment does not wait on the verdict: pinned within PIN_GRACE as for a
            # verified result, so an unverified stop still says what it failed in
            capture_environment(failure, repro, result)
        raise time_limit(repro, result.search)
    if result.flaky is not None:
        # both rates (or the seed) go into reduction.json; the draft states the repro's
        data = repro.read_json(repro.reduction_json) if repro.reduction_json.is_file() else {}
        write_json_atomic(repro.reduction_json, {**data, "flaky": result.flaky})
    if opts.pin_env:
        capture_environment(failure, repro, result)
    print_reduced(repro, result)
    if result.flaky is not None:
        console.print(f"[yellow]{escape(result.flaky['sentence'])}[/]")
    if result.stopped == engine.TIME_LIMIT:
        raise time_limit(repro, result.search, verified=True)
    return 0


def engine_options(opts: Options, repro: ReproDir) -> engine.Options:
    """The command's options as the engine's, with what only the bot knows: where a resume starts
    (the folder), the targets' value recipes, and the scrubber's test for private text."""
    start, seen, stats = resume(repro) if opts.resume else (None, {}, None)
    trace_file = repro.path / "trace.json"
    stored_trace = repro.read_json(trace_file) if start is not None and trace_file.is_file() else None
    return engine.Options(jobs=opts.jobs, gpus=opts.gpus, jobs_per_gpu=opts.jobs_per_gpu, max_time=opts.max_time,
                          deadline=opts.deadline, trace=opts.trace, warm=opts.warm, cluster=opts.cluster,
                          cluster_slots=opts.cluster_slots, start=start, seen=seen, stats=stats,
                          stored_trace=stored_trace, recipes=recipe_files(),
                          private=lambda text: bool(scrub(text).findings))


class Folder:
    """The engine's listener (reducer/engine.py ``Listener``) for `reduce`: every accepted step
    saved as repro.py and reduction.json, the trace kept scrubbed for --resume, a remeasured
    failure stored again, the verified result written with its digest; notes and progress on
    the console."""

    def __init__(self, repro: ReproDir) -> None:
        self.repro = repro
        self.bar: ReductionProgress | None = None

    def note(self, note: Note) -> None:
        if note.level == "warn":
            console.print(f"[yellow]{escape(note.lead)}[/] {escape(note.text)}" if note.lead
                          else f"[yellow]{escape(note.text)}[/]")
        elif note.level == "detail":
            console.print(f"[dim]{escape(note.text)}[/]")
        else:
            console.print(escape(note.text))

    @contextmanager
    def searching(self, start_tokens: int) -> Iterator[None]:
        with ReductionProgress(console, start_tokens) as self.bar:
            try:
                yield
            finally:
                self.bar = None

    def progress(self, progress: Progress) -> None:
        if self.bar is not None:
            self.bar.update(progress)

    def accepted(self, best: str, figures: dict[str, Any]) -> None:
        # repro.py stays exactly what ran: it must run and resume as it is.
        write_text_atomic(self.repro.repro, best)
        write_json_atomic(self.repro.reduction_json, figures)

    def traced(self, trace: dict[str, Any]) -> None:
        # kept (scrubbed) so that --resume still has the recorded values and dispatch targets
        write_text_atomic(self.repro.path / "trace.json", scrub(json.dumps(trace)).text)

    def remeasured(self, failure: Failure) -> None:
        # signature.json, original.py and seeded.py say the rate the run in flight now has
        record_failure(failure, self.repro.path.parent)

    def verified(self, result: Reduction) -> None:
        """repro.py as verified (self-contained where a run showed it could be), how it was
        verified and what it still needs, its own cold traceback and cost, and its digest: `file
        --submit` files no other (bot/verified.py)."""
        repro, alone = self.repro, result.verification
        assert alone is not None and result.record is not None and result.outcome is not None
        write_text_atomic(repro.repro, result.best)
        data = repro.read_json(repro.reduction_json) if repro.reduction_json.is_file() else {}
        data.update(verified=alone.verified, needs=alone.needs,
                    standalone={"attempts": alone.attempts, "fails_alone": alone.record is not None})
        write_json_atomic(repro.reduction_json, data)
        say_standalone(alone)
        write_text_atomic(repro.traceback_txt, result.record.text + "\n")
        # routing, cross-links and mentions come from the repro's run, never from frames only the
        # original went through; the draft can say the repro is lighter than the script
        data = repro.read_json(repro.reduction_json)
        if isinstance(data, dict):
            write_json_atomic(repro.reduction_json, {**data, "repro_record": result.record.to_dict(),
                                                     "cost": result.cost})
        record_verified(repro, result.best)


def say_standalone(result: Standalone) -> None:
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


def print_reduced(repro: ReproDir, result: Reduction) -> None:
    st = result.search.stats if result.search is not None else None
    assert st is not None and result.record is not None
    console.print(f"[bold green]reduced[/] {st.statements_before} → {result.statements} statements, "
                  f"{st.size_before.get('tokens')} → {st.size_after.get('tokens')} tokens "
                  f"in {st.runs} runs ({st.cache_hits} cache hits), {st.wall_time:.1f}s"
                  + (f" [{st.status}]" if st.status != "done" else ""))
    console.print(f"repro: [bold]{escape(str(repro.repro))}[/]")
    console.print(escape(traceback_tail(scrub(result.record.text).text, 6)))


def finished(repro: ReproDir) -> bool:
    """A reduction that reached its fixpoint and was confirmed cold has nothing to resume: say so
    rather than spend the GPU time of a second search that can only end where this one did. A
    repro.py that is not the one it verified (edited since, or a folder from before the digest)
    is not finished: --resume starts again from the original, with the runs it already made."""
    if not repro.reduction_json.is_file() or not repro.repro.is_file():
        return False
    saved = repro.read_json(repro.reduction_json)
    if saved.get("status") != "done":
        return False
    if not verification(repro).ok:
        console.print("[yellow]repro.py is not the one the reduction verified: reducing again from the original "
                      "(the runs already made are reused)[/]")
        return False
    n = saved.get("statements_after")
    console.print(f"{repro.path} is already reduced (repro.py" + (f", {n} statements" if n is not None else "")
                  + "): nothing to resume; run without --resume to reduce it again")
    return True


def resume(repro: ReproDir) -> tuple[str | None, dict[str, bool], dict[str, Any] | None]:
    """Where a --resume starts, its seen-set and stats: what an interrupted run left (the engine
    checks repro.py cold before it trusts it); the original when the folder holds no result."""
    if not repro.reduction_json.is_file():
        return None, {}, None
    saved = repro.read_json(repro.reduction_json)
    seen = dict(saved.pop("seen", {}) or {})
    if saved.get("status") == "done":      # done, but repro.py is gone: again from the original
        return None, seen, None
    best = repro.repro.read_text(encoding="utf-8") if repro.repro.is_file() else None
    return best, seen, saved


def time_limit(repro: ReproDir, result: ReductionResult | None = None, verified: bool = False) -> ReprobotError:
    """Say where the best result so far is, and whether it was verified; the error to stop the
    command with."""
    size = f" ({result.stats.statements_after} statements)" if result else ""
    how = "verified cold, " if verified else "not verified (`--resume` verifies it), " if result else ""
    console.print(f"[yellow]stopped at the time limit[/]; the best result so far{size}, {how}is in {repro.repro}; "
                  f"run again with --resume to continue")
    return ReprobotError("stopped at the time limit; run again with --resume to continue", ExitCode.TIME_LIMIT)


def capture_environment(failure: Failure, repro: ReproDir, bounds: Reduction) -> None:
    """env.json and the lockfile, from the user's interpreter; a failure here is reported, not
    fatal. The repro's own run (to learn what it imports) gets one candidate's timeout
    (``bounds.timeout``); the whole step, what is left of --max-time (``bounds.deadline``) plus
    PIN_GRACE."""
    from bot.env.lockfile import PIN_GRACE
    started = time.monotonic()
    left = None if bounds.deadline is None else bounds.deadline + PIN_GRACE - started
    if left is not None and left < 5.0:
        console.print(f"[yellow]environment not pinned:[/] --max-time reached; "
                      f"`reprobot env {escape(str(repro.path))}` pins it")
        return

    def bounded(seconds: float) -> float:
        return seconds if left is None else max(1.0, min(seconds, left - (time.monotonic() - started)))
    try:
        from bot.env.probe import DEFAULT_TIMEOUT, write_env
        write_env(repro, failure.runner.python, timeout=bounded(DEFAULT_TIMEOUT))
    except ReprobotError as e:
        console.print(f"[yellow]environment not captured:[/] {escape(e.message)}")
        return
    try:
        from bot.env.lockfile import LOCK_TIMEOUT, write_lock
        write_lock(repro, failure.runner.python, None, timeout=bounded(LOCK_TIMEOUT),
                   run_timeout=bounded(bounds.timeout or LOCK_TIMEOUT))
    except ReprobotError as e:
        console.print(f"[yellow]lockfile not written:[/] {escape(e.message)}")
    console.print(f"environment pinned in {time.monotonic() - started:.1f}s "
                  f"({repro.env_json.name}, {repro.requirements_lock.name})")
