"""Drive a reduction from the CLI: oracle, trace, progress display, the repro folder, resume."""
from __future__ import annotations

import json
import time
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn

from bot.output import console, traceback_tail
from bot.store import ReproDir, safe, write_json_atomic, write_text_atomic
from reducer.errors import ExitCode, ReprobotError
from reducer.failure import Failure
from reducer.gpu import GpuPool, parse_gpus
from reducer.oracle import Oracle, candidate_memory, candidate_timeout
from reducer.search import Progress, Reducer
from reducer.signature import find_match
from reducer.size import count_statements


def _load_resume(repro: ReproDir, oracle: Oracle) -> tuple[str | None, dict[str, bool], dict[str, Any] | None]:
    """Best source, seen-set and stats of an interrupted run, if there is one to continue."""
    if not repro.reduction_json.is_file():
        return None, {}, None
    saved = repro.read_json(repro.reduction_json)
    seen = dict(saved.pop("seen", {}) or {})
    if saved.get("status") == "done":
        return None, seen, None
    best = repro.repro.read_text(encoding="utf-8") if repro.repro.is_file() else None
    # repro.py is stored scrubbed; if scrubbing changed what it does, start again from the
    # original but keep the cache, which still saves every run it remembers.
    if best is not None and not oracle.test(best).interesting:
        best = None
    return best, seen, saved


def _trace(failure: Failure):
    from reducer.trace import runner_run_fn, trace_run
    try:
        return trace_run(failure.spec.source, runner_run_fn(failure.runner))
    except Exception as e:  # tracing is an optimisation: never let it stop a reduction
        console.print(f"[yellow]trace-guided first cut skipped:[/] {escape(str(e))[:200]}")
        return None


def reduce_failure(failure: Failure, repro: ReproDir, *, jobs: int = 1, gpus: str | None = None,
                   jobs_per_gpu: int = 1, max_time: float | None = None, resume: bool = False,
                   trace: bool = True, pin_env: bool = True) -> int:
    pool = GpuPool(parse_gpus(gpus), per_gpu=jobs_per_gpu)
    if len(pool) and jobs > pool.slots:
        console.print(f"[yellow]--jobs {jobs} > {pool.slots} GPU slots: candidates queue for a free GPU "
                      f"(--jobs-per-gpu lets small candidates share one)[/]")
    oracle = Oracle(failure.runner, failure.signature, failure.spec.options,
                    timeout=candidate_timeout(failure.wall_time), gpus=pool,
                    max_rss=candidate_memory(failure.peak_rss), allow_hang=failure.hangs,
                    stop_grace=max(2.0, 0.25 * failure.wall_time))
    start_source, seen, stats = (None, {}, None)
    if resume:
        start_source, seen, stats = _load_resume(repro, oracle)
        if start_source is not None:
            console.print(f"resuming from repro.py ({count_statements(start_source)} statements)")
    source = start_source or failure.spec.source
    trace_file = repro.path / "trace.json"
    trace_data = None
    if trace and start_source is not None and trace_file.is_file():
        from reducer.trace import TraceData
        trace_data = TraceData.from_dict(failure.spec.source, repro.read_json(trace_file))
    elif trace:
        # a resumed folder without its trace (copied without it) traces the original again
        trace_data = _trace(failure)
        if trace_data is not None:
            # kept (scrubbed) so that --resume still has the recorded values and dispatch targets
            write_text_atomic(trace_file, safe(json.dumps(trace_data.to_dict())))

    def save(best: str, stats_dict: dict[str, Any], status: str | None = None, seen_now=None) -> None:
        write_text_atomic(repro.repro, safe(best))
        data = dict(stats_dict)
        if status:
            data["status"] = status
        data["seen"] = seen_now if seen_now is not None else reducer.seen
        data["gpus"] = pool.gpus
        data["gpu_not_released"] = pool.unreleased
        data["oracle_run_seconds"] = round(oracle.run_seconds, 3)
        write_json_atomic(repro.reduction_json, data)

    reducer = Reducer(source, oracle, jobs=jobs, max_time=max_time, trace=trace_data,
                      seen=seen, stats=stats, on_accept=lambda best, st: save(best, st))
    save(source, reducer.stats.to_dict(), "running")

    with RichProgress(TextColumn("[bold]{task.fields[pass_name]:<18}"), BarColumn(bar_width=24),
                      TextColumn("{task.fields[tokens]} tokens · "
                                 "runs {task.fields[runs]} · kept {task.fields[accepted]} · "
                                 "cache {task.fields[hits]}"),
                      TimeElapsedColumn(), console=console, transient=False) as bar:
        start_tokens = max(reducer.best_size.tokens, 1)
        task = bar.add_task("reduce", total=start_tokens, pass_name="start",
                            tokens=start_tokens, runs=0, accepted=0, hits=0)

        def progress(p: Progress) -> None:
            bar.update(task, completed=start_tokens - p.size_now.tokens, pass_name=p.pass_name,
                       tokens=p.size_now.tokens,
                       runs=p.runs, accepted=p.accepted, hits=p.cache_hits)

        reducer.on_progress = progress
        result = reducer.run()

    status = result.stats.status
    save(result.best_source, result.stats.to_dict(), status, result.seen)
    if status == "interrupted":
        console.print(f"[yellow]interrupted:[/] best so far kept in {repro.repro}; "
                      f"`reprobot reduce {failure.spec.script} --resume` continues")
        raise ReprobotError("interrupted; the best result so far is saved", ExitCode.INTERRUPTED)

    # The final word comes from one more run in a clean scratch directory.
    verdict = oracle.test(result.best_source)
    record = find_match(verdict.outcome.tracebacks, failure.signature, failure.spec.options)
    if record is None:
        raise ReprobotError(f"the reduced script did not fail the same way when re-run in a clean "
                            f"directory (flaky?): kept in {repro.repro}", ExitCode.FLAKY)
    write_text_atomic(repro.traceback_txt, safe(record.text) + "\n")
    if pin_env:
        _capture_environment(failure, repro)
    st = result.stats
    console.print(f"[bold green]reduced[/] {st.statements_before} → {st.statements_after} statements, "
                  f"{st.size_before.get('tokens')} → {st.size_after.get('tokens')} tokens "
                  f"in {st.runs} runs ({st.cache_hits} cache hits), {st.wall_time:.1f}s"
                  + (f" [{status}]" if status != "done" else ""))
    console.print(f"repro: [bold]{escape(str(repro.repro))}[/]")
    console.print(escape(traceback_tail(safe(record.text), 6)))
    return 0


def _capture_environment(failure: Failure, repro: ReproDir) -> None:
    """env.json and the lockfile, from the user's interpreter; a failure here is reported, not fatal."""
    started = time.monotonic()
    try:
        from bot.env.probe import write_env
        write_env(repro, failure.runner.python)
    except ReprobotError as e:
        console.print(f"[yellow]environment not captured:[/] {escape(e.message)}")
        return
    try:
        from bot.env.lockfile import write_lock
        write_lock(repro, failure.runner.python, None)
    except ReprobotError as e:
        console.print(f"[yellow]lockfile not written:[/] {escape(e.message)}")
    console.print(f"environment pinned in {time.monotonic() - started:.1f}s "
                  f"({repro.env_json.name}, {repro.requirements_lock.name})")
