"""The script's folder, shipped once to every slot of a cluster (through Ray's object store), so
each node makes the same per-run scratch copies a local run makes (reducer/run/runner.py)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reducer.run.runner import Runner

# Above this many bytes in all, shipping is refused: the object store is not the place for a
# dataset, and the local runner links files that big instead of copying them anyway.
MAX_PAYLOAD_BYTES = 256 * 1024 * 1024


@dataclass
class FolderPayload:
    script_rel: str                                         # the script, relative to the folder
    folder_name: str                                        # the folder's own name (frames show it)
    files: dict[str, bytes] = field(default_factory=dict)   # copied into every run
    # Big files (model weights, datasets) the local runner links instead of copying: a node links
    # the same absolute path, so they must be on a filesystem the nodes share.
    links: dict[str, str] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.files.values())

    def materialise(self, root: Path) -> Path:
        """Write the folder under ``root``; the script's path there. Links whose target is not on
        this node are left out (a run that needs one fails as it would without the file)."""
        folder = root / self.folder_name
        folder.mkdir(parents=True, exist_ok=True)
        for rel, data in self.files.items():
            dst = folder / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(data)
        for rel, target in self.links.items():
            dst = folder / rel
            if os.path.exists(target) and not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.symlink_to(target)
        return folder / self.script_rel


def pack(runner: "Runner") -> FolderPayload:
    """The files a local run copies (and links) into its scratch folder, read once."""
    payload = FolderPayload(script_rel=runner.script_rel, folder_name=runner.script_dir.name or "script")
    for rel, link in runner._files:
        src = runner.script_dir / rel
        if link:
            payload.links[rel.as_posix()] = str(src.resolve())
            continue
        try:
            payload.files[rel.as_posix()] = src.read_bytes()
        except OSError:
            continue
        if payload.size > MAX_PAYLOAD_BYTES:
            raise ValueError(f"the script's folder holds over {MAX_PAYLOAD_BYTES // 2**20} MiB of small files: "
                             f"too much to ship to a cluster")
    return payload
