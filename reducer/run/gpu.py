"""GPUs for candidate runs: which are visible, one disjoint set of them per parallel job (as many
GPUs as the original used), and proof that a killed candidate's memory is gone before the next
candidate starts on that GPU."""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
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


def split_sets(gpus: list[str], per_job: int) -> list[tuple[str, ...]]:
    """Disjoint GPU sets of ``per_job`` devices each, in the order given: 4 GPUs, 2 per job →
    (0, 1), (2, 3). GPUs left over (5 GPUs, 2 per job: GPU 4) are not used."""
    per_job = max(1, per_job)
    if per_job > len(gpus):
        raise ReprobotError(f"a job needs {per_job} GPUs but only {len(gpus)} are given "
                            f"({', '.join(gpus) or 'none'}): pass more with --gpus, or fewer with --gpus-per-job",
                            ExitCode.USAGE)
    return [tuple(gpus[i:i + per_job]) for i in range(0, len(gpus) - per_job + 1, per_job)]


def visible_value(gpus: tuple[str, ...] | list[str]) -> str:
    """CUDA_VISIBLE_DEVICES for a set, in its order."""
    return ",".join(gpus)


class Slot:
    """One candidate's claim on a GPU set; the oracle notes the process group it ran in."""

    def __init__(self, gpus: tuple[str, ...] | None) -> None:
        self.gpus = tuple(gpus) if gpus else ()
        self.pgid: int | None = None

    @property
    def gpu(self) -> str | None:
        """CUDA_VISIBLE_DEVICES for this slot ("0", "2,3"), None when nothing is pinned."""
        return visible_value(self.gpus) if self.gpus else None

    def env(self, count: int | None = None) -> dict[str, str] | None:
        """The run's pinning: the slot's set, or only its first ``count`` GPUs."""
        if not self.gpus:
            return None
        return {"CUDA_VISIBLE_DEVICES": visible_value(self.gpus[:count] if count else self.gpus)}


class GpuPool:
    """Hands each concurrent candidate a GPU set; a set goes back only once its memory is released.

    ``per_job`` GPUs make one set (a failure that needs its model split over two cards runs on
    two); sets are disjoint. ``per_gpu`` > 1 lets several small candidates share one set (a tiny
    model on an 80 GB card); the default gives each parallel job its own set.
    """

    def __init__(self, gpus: list[str], per_gpu: int = 1, per_job: int = 1) -> None:
        self.gpus = list(gpus)
        self.per_job = max(1, per_job)
        self.sets: list[tuple[str, ...]] = split_sets(self.gpus, self.per_job) if self.gpus else []
        self._baseline: dict[str, set[int] | None] = {}
        for s in self.sets:
            for g in s:
                self._baseline[g] = compute_pids(g)
        self._cond = threading.Condition()
        # one token per job a set may take at a time, in hand-out order: every set once, then again
        self._free: list[tuple[str, ...]] = [s for _ in range(max(1, per_gpu)) for s in self.sets]
        self.slots = len(self._free)
        self.unreleased = 0

    def __len__(self) -> int:
        return len(self.gpus)

    @contextmanager
    def acquire(self, want: tuple[str, ...] | None = None) -> Iterator[Slot]:
        """A free set (the one first in line), or with ``want`` exactly that set (the set the
        original's failure was confirmed on), waiting until it is free."""
        if not self.sets:
            yield Slot(None)
            return
        want = tuple(want) if want else None
        if want is not None and want not in self.sets:
            raise ValueError(f"GPU set {want} is not one of the pool's {self.sets}")
        with self._cond:
            while not (self._free if want is None else want in self._free):
                self._cond.wait()
            taken = self._free.pop(0 if want is None else self._free.index(want))
        slot = Slot(taken)
        try:
            yield slot
        finally:
            for g in taken:
                if not wait_released(g, self._baseline[g], slot.pgid):
                    self.unreleased += 1  # counted and reported in reduction.json; the GPU is reused
            with self._cond:
                self._free.append(taken)
                self._cond.notify_all()
