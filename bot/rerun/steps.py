"""`versions` and `contrast` as steps: what the commands and `reduce --versions/--contrast` run."""
from __future__ import annotations

from typing import Callable

from bot.rerun.contrast import Contrast, contrast, handback_line, handed_back
from bot.rerun.lock import read_lock
from bot.rerun.rate import LaterRuns
from bot.rerun.releases import IndexOptions
from bot.rerun.report import save_contrast, save_versions
from bot.rerun.repro_run import ReproRunner, StoredRepro
from bot.rerun.versions import Bisection, Row, VersionRunner
from bot.store import ReproDir

Notify = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def run_versions(folder: ReproDir, python: str, *, index: IndexOptions | None = None,
                 packages: tuple[str, ...] | None = None, bisect: str | None = None, sweep: str | None = None,
                 low: str | None = None, high: str | None = None, git: tuple[tuple[str, str], ...] = (),
                 timeout: float | None = None, notify: Notify = _quiet,
                 say_rate: Notify | None = None) -> tuple[list[Row], Bisection | None, dict]:
    """The rows (or the bisection), written to versions.json; ``say_rate`` (default ``notify``) hears
    the one line saying that the runs on the locked versions changed the failure's rate."""
    repro = StoredRepro.load(folder)
    lock = read_lock(folder.requirements_lock)
    runner = ReproRunner(repro, python, timeout=timeout)
    try:
        # The interpreter as the runner resolved it: the overlays and their cache key must name the
        # same executable the rows run, not a bare name looked up again elsewhere.
        versions = VersionRunner(runner, runner.runner.python, lock, index or IndexOptions(tuple(lock.index_options)),
                                 notify)
        versions.later = LaterRuns(folder, "versions")
        bisection = None
        rows: list[Row] = []
        if bisect:
            bisection = versions.bisect(bisect, low, high)
        elif sweep:
            rows = versions.sweep(sweep, low, high)
        else:
            rows = versions.default_rows(packages)
        for package, url in git:
            rows.append(versions.row(f"{package} (git)", {package: url}))
    finally:
        runner.close()
    data = save_versions(folder, rows, bisection, versions.base.full_python, runner.runs)
    # the runs on the locked versions count toward the failure's rate (said when they change it)
    rate_line = versions.later.save()
    if rate_line:
        (say_rate or notify)(rate_line)
    return rows, bisection, {**data, "rate": rate_line}


def run_contrast(folder: ReproDir, python: str, *, jobs: int = 1, gpu: str | None = None,
                 timeout: float | None = None, notify: Notify = _quiet) -> tuple[list[Contrast], dict]:
    """The changes' verdicts, written to contrast.json after each one (a stop keeps them: contrast.py)."""
    runner = ReproRunner(StoredRepro.load(folder), python, timeout=timeout, gpu=gpu)
    written: dict = {}
    given: list[dict] = []

    def save(results: list[Contrast], planned: int, stopped: str | None) -> dict:
        written.update(save_contrast(folder, results, runner.runs, planned, stopped, given))
        return written

    try:
        # first, before the changes: one traced run says whether the library failed on a value the
        # repro's own function handed back to it (a stop during the changes keeps it)
        given += handed_back(runner)
        for row in given:
            notify(handback_line(row))
        results = contrast(runner, jobs=jobs, notify=notify, save=save)
    finally:
        runner.close()
    return results, dict(written)
