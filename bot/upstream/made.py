"""built.json: which package made the tensors the failing line read (written by
bot/rerun/built.py from one run of the repro, read by routing as evidence: a check that fired on a
tensor another package of ours made and handed over is that package's as much as the raiser's)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FILE = "built.json"


@dataclass(frozen=True)
class Made:
    name: str               # as the failing line reads it: "key_states", "self.keys[0]"
    package: str | None     # the maker's import package; None: the user's script
    at: str                 # "peft/peft_model.py:get_prompt", or "<script>:get_batch"


@dataclass
class Built:
    """The library frames of the failing run, innermost last, each with the tensors its line read
    and who made them."""
    frames: list[tuple[str, list[Made]]] = field(default_factory=list)   # ("pkg/file.py:func", made)

    def to_dict(self) -> dict[str, Any]:
        return {"frames": [{"frame": f, "values": [asdict(m) for m in made]} for f, made in self.frames]}

    @classmethod
    def from_dict(cls, data: Any) -> "Built":
        frames = []
        for row in (data or {}).get("frames") or []:
            if isinstance(row, dict) and isinstance(row.get("frame"), str):
                made = [Made(str(v.get("name")), v.get("package"), str(v.get("at")))
                        for v in row.get("values") or [] if isinstance(v, dict)]
                frames.append((row["frame"], made))
        return cls(frames)

    def handed_over(self, raiser: str) -> list[tuple[str, Made]]:
        """Tensors the innermost frame of package ``raiser`` read that another package of the stack
        made: (that frame, what was made)."""
        for frame, made in reversed(self.frames):
            if frame.split("/", 1)[0] == raiser:
                return [(frame, m) for m in made if m.package not in (None, raiser)]
        return []


def read_built(folder: Path) -> Built | None:
    """built.json of a repro folder, or None when there is none (or it is unreadable)."""
    path = Path(folder) / FILE
    if not path.is_file():
        return None
    try:
        return Built.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, AttributeError, TypeError):
        return None
