"""How a repro folder's repro is run: recorded once by `reduce`, read by every later step.

`reduce` writes the recipe into signature.json when it records the failure (bot/store.py): the
script's name under its launch line's folder, its arguments, the launch line as typed
(torchrun, accelerate launch, python -m), the environment variables its runs set (the hang
watch of a hanging failure) and how long the original ran. Everything that runs the repro
afterwards — environment pinning's run to learn what it imports, `versions`, `contrast`,
`watch`, `file --submit`'s re-check — gets its runner from ``RunRecipe.runner``, and the draft's
steps to reproduce are ``RunRecipe.command``: no step builds a command line of its own
(tests/test_run_recipe.py checks that nothing in bot/ starts the user's interpreter any other way).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reducer.errors import ExitCode, ReprobotError
from reducer.run.processes import script_argument
from reducer.run.runner import Runner, RunSpec

# A stored repro runs at least this long before it counts as hung, whatever the original took.
TIMEOUT_FLOOR = 60.0


@dataclass(frozen=True)
class RunRecipe:
    script: str                                  # the script's path under the launch line's folder
    args: tuple[str, ...] = ()
    launch: tuple[str, ...] = ()                 # the launch line as typed; () for `python SCRIPT`
    # what the launch line ran, with the script under its own name (the draft's steps)
    launch_run: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)   # variables every run set (the hang watch)
    original_wall: float = 0.0

    @classmethod
    def from_signature(cls, meta: dict[str, Any]) -> "RunRecipe":
        """From signature.json's fields; a folder written before the recipe had ``run_env`` runs
        with none (what every step did then)."""
        launch = meta.get("launch") if isinstance(meta.get("launch"), dict) else {}
        walls = [r.get("wall_time") or 0.0 for r in meta.get("runs") or [] if isinstance(r, dict)]
        env = meta.get("run_env") if isinstance(meta.get("run_env"), dict) else {}
        return cls(str(meta.get("script") or "repro.py"), tuple(str(a) for a in meta.get("args") or ()),
                   tuple(str(t) for t in launch.get("tokens") or ()),
                   tuple(str(t) for t in launch.get("run") or ()),
                   {str(k): str(v) for k, v in env.items()}, float(max(walls, default=0.0)))

    @classmethod
    def load(cls, signature_json: Path) -> "RunRecipe":
        import json
        try:
            return cls.from_signature(json.loads(signature_json.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise ReprobotError(f"{signature_json.parent}: no signature.json; run `reprobot reduce` first",
                                ExitCode.FILE_MISSING) from None
        except (OSError, ValueError, TypeError, AttributeError) as e:
            raise ReprobotError(f"{signature_json}: malformed record ({e})", ExitCode.BAD_INPUT) from None

    def default_timeout(self) -> float:
        return max(TIMEOUT_FLOOR, 5 * self.original_wall + 10)

    def command(self, script: str | None = None) -> str:
        """How a person runs it: the launch line the failure was reduced under, else
        ``python SCRIPT ARGS``; ``script`` renames the script (the draft shows ``repro.py``)."""
        name = script or self.script
        if self.launch_run:
            return shlex.join([name if t == self.script else t for t in self.launch_run])
        return shlex.join(["python", script_argument(name), *self.args])

    def runner(self, home: Path, source: str, python: str, timeout: float | None = None,
               gpu: str | None = None) -> Runner:
        """A runner for ``source`` as the repro, written under its own name in ``home`` (a fresh
        folder the caller owns): through the launch line, read again there, with its arguments
        and its environment."""
        from reducer.run.launch import parse_launch
        script = home / self.script
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(source, encoding="utf-8")
        launch = None
        if self.launch:
            line = parse_launch(list(self.launch), home, python)
            launch = line if line.needs_launcher else None
        return Runner(RunSpec(script=script, python=python, args=self.args,
                              timeout=timeout or self.default_timeout(), gpu=gpu, env=dict(self.env),
                              launch=launch))
