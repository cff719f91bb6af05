"""GPUs for candidate runs: which are visible, one per parallel job, and proof that a
killed candidate's memory is gone before the next candidate starts on that GPU."""
from __future__ import annotations

import os
import queue
import shutil
import subprocess
import time
from contextlib import contextmanager
from typing import Iterator

from reducer.errors import ExitCode, ReprobotError

_SMI_TIMEOUT = 15


def _smi(*args: str) -> list[str] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=_SMI_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def visible_gpus() -> list[str]:
    """GPU indices a run may use: CUDA_VISIBLE_DEVICES if set, else what nvidia-smi lists."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    rows = _smi("--query-gpu=index", "--format=csv,noheader")
    return rows or []


def parse_gpus(value: str | None) -> list[str]:
    """--gpus "0,1" → ["0", "1"]; None → all visible; "none" → no pinning."""
    if value is None:
        return visible_gpus()
    if value.strip().lower() in ("none", ""):
        return []
    gpus = [g.strip() for g in value.split(",") if g.strip()]
    for g in gpus:
        if not (g.isdigit() or g.startswith(("GPU-", "MIG-"))):
            raise ReprobotError(f"--gpus {value}: expected indices like 0,1", ExitCode.USAGE)
    return gpus


def _uuid_of(gpu: str) -> str | None:
    rows = _smi("--query-gpu=index,uuid", "--format=csv,noheader")
    for row in rows or []:
        idx, _, uuid = row.partition(",")
        if idx.strip() == gpu or uuid.strip() == gpu:
            return uuid.strip()
    return None


def compute_pids(gpu: str) -> set[int] | None:
    """PIDs holding memory on that GPU, or None where nvidia-smi cannot tell."""
    uuid = _uuid_of(gpu)
    rows = _smi("--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader")
    if uuid is None or rows is None:
        return None
    pids: set[int] = set()
    for row in rows:
        owner, _, pid = row.partition(",")
        if owner.strip() == uuid and pid.strip().isdigit():
            pids.add(int(pid))
    return pids


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def wait_released(gpu: str, baseline: set[int] | None, killed_pgid: int | None = None,
                  timeout: float = 30.0) -> bool:
    """Wait until the killed candidate holds no memory on the GPU.

    A listed process that is dead (its memory is still being torn down) or that belongs to
    the killed candidate's process group is the candidate's; anything present at baseline,
    or alive in another group (a candidate sharing the GPU), is not.
    """
    if baseline is None:
        return True  # nothing to check with: not an NVIDIA machine
    deadline = time.monotonic() + timeout
    while True:
        now = compute_pids(gpu)
        if now is None:
            return True
        stale = {p for p in now - baseline if _pgid(p) is None or _pgid(p) == killed_pgid}
        if not stale:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


class Slot:
    """One candidate's claim on a GPU; the oracle notes the process group it ran in."""

    def __init__(self, gpu: str | None) -> None:
        self.gpu = gpu
        self.pgid: int | None = None


class GpuPool:
    """Hands each concurrent candidate a GPU; a slot goes back only once its memory is released.

    ``per_gpu`` > 1 lets several small candidates share one GPU (a tiny model on an 80 GB
    card); the default gives each parallel job its own GPU.
    """

    def __init__(self, gpus: list[str], per_gpu: int = 1) -> None:
        self.gpus = list(gpus)
        self._free: queue.Queue[str] = queue.Queue()
        self._baseline: dict[str, set[int] | None] = {}
        for g in self.gpus:
            self._baseline[g] = compute_pids(g)
        for _ in range(max(1, per_gpu)):
            for g in self.gpus:
                self._free.put(g)
        self.slots = len(self.gpus) * max(1, per_gpu)
        self.unreleased = 0

    def __len__(self) -> int:
        return len(self.gpus)

    @contextmanager
    def acquire(self) -> Iterator[Slot]:
        if not self.gpus:
            yield Slot(None)
            return
        slot = Slot(self._free.get())
        try:
            yield slot
        finally:
            if not wait_released(slot.gpu, self._baseline[slot.gpu], slot.pgid):
                self.unreleased += 1  # counted and reported in reduction.json; the GPU is reused
            self._free.put(slot.gpu)
