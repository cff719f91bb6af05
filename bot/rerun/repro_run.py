"""One cold run of a stored repro in a clean directory, judged against its signature."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from bot.rerun.verdict import Verdict, classify
from bot.run_recipe import RunRecipe
from bot.store import ReproDir
from reducer.failure.outcome import Outcome, TracebackRecord
from reducer.failure.signature import MatchOptions, Signature


@dataclass
class StoredRepro:
    folder: ReproDir
    source: str
    target: Signature
    options: MatchOptions
    # how the reduction ran it (launch line, arguments, environment): every later run of the
    # repro goes through it (bot/run_recipe.py)
    recipe: RunRecipe
    # the failure as reduce recorded it (the user's script's frames): which library call failed
    record: TracebackRecord | None = None

    @classmethod
    def load(cls, folder: ReproDir) -> "StoredRepro":
        meta = folder.read_json(folder.signature_json)
        if not folder.repro.is_file():
            from reducer.errors import ExitCode, ReprobotError
            raise ReprobotError(f"{folder.path}: no repro.py; run `reprobot reduce` first", ExitCode.BAD_INPUT)
        return cls(folder, folder.repro.read_text(encoding="utf-8"), Signature.from_dict(meta["signature"]),
                   MatchOptions.from_dict(meta.get("options") or {}), RunRecipe.from_signature(meta),
                   TracebackRecord.from_dict(meta["record"]) if isinstance(meta.get("record"), dict) else None)

    def default_timeout(self) -> float:
        return self.recipe.default_timeout()

    def _original_path(self):
        # seeded.py: the user's script with the seed reduce fixed (a flaky failure cannot pass there
        # by chance); else original.py, the user's script as given
        seeded = self.folder.path / "seeded.py"
        return seeded if seeded.is_file() else self.folder.original

    def has_original(self) -> bool:
        return self._original_path().is_file()

    def original_source(self) -> str:
        """The user's script, as reduce ran it: what `versions` runs where the repro fails otherwise."""
        return self._original_path().read_text(encoding="utf-8")


class ReproRunner:
    """Runs sources of one repro cold: a fresh directory holding only the script, its own TMPDIR,
    through the folder's run recipe."""

    def __init__(self, repro: StoredRepro, python: str, timeout: float | None = None,
                 gpu: str | None = None) -> None:
        self.repro = repro
        self._home = Path(tempfile.mkdtemp(prefix="reprobot-rerun-"))
        self.timeout = timeout or repro.default_timeout()
        self.runner = repro.recipe.runner(self._home, repro.source, python, self.timeout, gpu)
        self.runs = 0

    def outcome(self, source: str | None = None, env: dict[str, str] | None = None) -> Outcome:
        self.runs += 1
        return self.runner.run(self.repro.source if source is None else source, extra_env=env)

    def verdict(self, source: str | None = None, env: dict[str, str] | None = None) -> Verdict:
        return classify(self.outcome(source, env), self.repro.target, self.repro.options)

    def original_verdict(self, env: dict[str, str] | None = None) -> Verdict:
        """The user's script run as the repro is (same recipe, launch line, arguments and timeout),
        judged against the same signature."""
        return self.verdict(self.repro.original_source(), env)

    def close(self) -> None:
        import shutil
        shutil.rmtree(self._home, ignore_errors=True)
