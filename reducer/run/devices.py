"""Which GPUs a run of the original used, measured inside the run.

Every interpreter a run starts loads the exception recorder (``exception_hook/sitecustomize.py``);
while ``REPROBOT_DEVICES`` names a file, it registers an ``atexit`` hook that appends one JSON
line per process that had CUDA initialised: the ``CUDA_VISIBLE_DEVICES`` it saw, how many devices
torch saw, and which of them the caching allocator ever held memory on
(``torch.cuda.max_memory_allocated(i) > 0`` or ``memory_reserved(i) > 0``). The hook never
initialises CUDA itself and never imports torch: a process that did not use CUDA writes
``"cuda": false``.

Why the allocator and not NVML (``nvidia-smi --query-compute-apps=pid,gpu_uuid``): the peak
survives the frees of a failing run (a process polled after its exception may hold nothing), it
needs no polling race against a run that lasts two seconds, and it does not depend on PIDs, which
a container's PID namespace hides from nvidia-smi. What it misses: a process that ends without
running atexit (killed by a signal or a timeout, ``os._exit`` in a multiprocessing child, a hard
crash) and CUDA used outside torch. Then nothing is known, and a job gets one GPU unless
``--gpus-per-job`` says otherwise.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

DEVICES_ENV = "REPROBOT_DEVICES"
_MAX_BYTES = 1 << 20


@dataclass
class DeviceUse:
    """What the processes of one run reported at exit."""

    processes: int = 0                                  # processes that reported (CUDA or not)
    cuda_processes: int = 0                             # ...of which had CUDA initialised
    visible: int = 0                                    # most devices one process saw
    used: list[str] = field(default_factory=list)       # physical devices with memory, in order

    @property
    def known(self) -> bool:
        return self.processes > 0

    def to_dict(self) -> dict:
        return {"processes": self.processes, "cuda_processes": self.cuda_processes,
                "visible": self.visible, "used": list(self.used)}


def _physical(index: int, visible: str | None) -> str:
    """Device ``index`` of a process that saw CUDA_VISIBLE_DEVICES=``visible``, as the name the
    parent uses ("1" for index 1 of "0,1"; "3" for index 1 of "2,3")."""
    if visible:
        names = [v.strip() for v in visible.split(",") if v.strip()]
        if 0 <= index < len(names):
            return names[index]
    return str(index)


def read_devices(path: Path) -> DeviceUse:
    use = DeviceUse()
    try:
        with path.open("rb") as fh:
            data = fh.read(_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return use
    used: list[str] = []
    for line in data.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        use.processes += 1
        if not row.get("cuda"):
            continue
        use.cuda_processes += 1
        visible = row.get("visible") if isinstance(row.get("visible"), str) else None
        count = row.get("count")
        if isinstance(count, int):
            use.visible = max(use.visible, count)
        for i in row.get("used") or []:
            if isinstance(i, int):
                name = _physical(i, visible)
                if name not in used:
                    used.append(name)
    use.used = used
    return use
