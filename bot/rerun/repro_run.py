"""One cold run of a stored repro in a clean directory, judged against its signature."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from bot.store import ReproDir
from reducer.outcome import Outcome
from reducer.run.runner import Runner, RunSpec
from reducer.signature import MatchOptions, Signature

from bot.rerun.verdict import Verdict, classify

DEFAULT_TIMEOUT_FLOOR = 60.0


@dataclass
class StoredRepro:
    folder: ReproDir
    source: str
    script_name: str
    args: tuple[str, ...]
    target: Signature
    options: MatchOptions
    original_wall: float
    # the launch line every run of the reduction used (torchrun, accelerate launch), as typed;
    # every later run of the repro goes through it too
    launch_tokens: tuple[str, ...] = ()

    @classmethod
    def load(cls, folder: ReproDir) -> "StoredRepro":
        meta = folder.read_json(folder.signature_json)
        if not folder.repro.is_file():
            from reducer.errors import ExitCode, ReprobotError
            raise ReprobotError(f"{folder.path}: no repro.py; run `reprobot reduce` first", ExitCode.BAD_INPUT)
        walls = [r.get("wall_time") or 0.0 for r in meta.get("runs", [])]
        launch = meta.get("launch") if isinstance(meta.get("launch"), dict) else {}
        return cls(folder, folder.repro.read_text(encoding="utf-8"), meta.get("script") or "repro.py",
                   tuple(meta.get("args") or ()), Signature.from_dict(meta["signature"]),
                   MatchOptions.from_dict(meta.get("options") or {}), max(walls, default=0.0),
                   tuple(str(t) for t in launch.get("tokens") or ()))

    def default_timeout(self) -> float:
        return max(DEFAULT_TIMEOUT_FLOOR, 5 * self.original_wall + 10)


def _launch(repro: StoredRepro, home: Path, python: str):
    """The reduction's launch line, read again in this run's folder (its script is the repro
    there, under the script's own path); None for a plain ``python script.py``."""
    if not repro.launch_tokens:
        return None
    from reducer.run.launch import parse_launch
    line = parse_launch(list(repro.launch_tokens), home, python)
    return line if line.needs_launcher else None


class ReproRunner:
    """Runs sources of one repro cold: a fresh directory holding only the script, its own TMPDIR."""

    def __init__(self, repro: StoredRepro, python: str, timeout: float | None = None,
                 gpu: str | None = None) -> None:
        self.repro = repro
        self._home = Path(tempfile.mkdtemp(prefix="reprobot-rerun-"))
        script = self._home / repro.script_name
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(repro.source, encoding="utf-8")
        self.timeout = timeout or repro.default_timeout()
        self.runner = Runner(RunSpec(script=script, python=python, args=repro.args,
                                     timeout=self.timeout, gpu=gpu, launch=_launch(repro, self._home, python)))
        self.runs = 0

    def outcome(self, source: str | None = None, env: dict[str, str] | None = None) -> Outcome:
        self.runs += 1
        return self.runner.run(self.repro.source if source is None else source, extra_env=env)

    def verdict(self, source: str | None = None, env: dict[str, str] | None = None) -> Verdict:
        return classify(self.outcome(source, env), self.repro.target, self.repro.options)

    def close(self) -> None:
        import shutil
        shutil.rmtree(self._home, ignore_errors=True)
