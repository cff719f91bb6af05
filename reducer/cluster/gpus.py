"""The oracle's GPU pool while candidates run on a cluster: Ray gives each slot its own GPUs
(``num_gpus``), so nothing is handed out here. What still travels is how many of the slot's GPUs
a run may see (the one-GPU check of a failure that needs several)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from reducer.run.gpu import GpuPool

# Read and removed by the slot: show the run only its first N GPUs.
GPU_COUNT_ENV = "REPROBOT_CLUSTER_GPU_COUNT"


class CountSlot:
    def __init__(self) -> None:
        self.pgid: int | None = None     # the run's group is on another node: nothing to wait for here

    def env(self, count: int | None = None) -> dict[str, str] | None:
        return {GPU_COUNT_ENV: str(count)} if count else None


class ClusterGpus:
    """Looks like the local GpuPool to the oracle; the local one keeps its sets for the runs that
    stay local (traces, the final verdict)."""

    def __init__(self, local: GpuPool) -> None:
        self.local = local
        self.gpus, self.sets, self.per_job = local.gpus, local.sets, local.per_job

    @property
    def unreleased(self) -> int:
        return self.local.unreleased

    def __len__(self) -> int:
        return len(self.local)

    @contextmanager
    def acquire(self, want: tuple[str, ...] | None = None) -> Iterator[CountSlot]:
        yield CountSlot()


def slot_visible(extra_env: dict[str, str] | None, slot_gpus: list[str]) -> dict[str, str]:
    """A run's extra environment on a slot: CUDA_VISIBLE_DEVICES names the slot's own GPUs (as many
    as the caller asked for: a count, or the length of a local set it named), never the caller's."""
    extra = dict(extra_env or {})
    count = extra.pop(GPU_COUNT_ENV, None)
    named = extra.pop("CUDA_VISIBLE_DEVICES", None)
    if slot_gpus:
        n = int(count) if count else (len([g for g in named.split(",") if g]) if named else len(slot_gpus))
        extra["CUDA_VISIBLE_DEVICES"] = ",".join(slot_gpus[:max(1, n)])
    return extra
