# reprobot corpus: device_map_entry
# Exercises: a failure that happens ONLY when one specific dict entry is present: a
#   device_map-like placement dict where the single "disk" entry makes the planner write an
#   offload index whose entries carry an Enum (not JSON serialisable); every "cpu"/GPU entry is
#   harmless and must be dropped, the "disk" entry must stay. Also an Enum, a planner class,
#   memory budget arithmetic that never matters.
# Expected failure: TypeError: Object of type DType is not JSON serializable
#   raised by `json.dumps(index, indent=2)` in OffloadPlanner.write_index (line 98, marked FAILING LINE).
# Ideal result (about 5 statements):
#   import enum, json
#   class DType(enum.Enum): F16 = 'float16'
#   json.dumps({'lm_head': {'dtype': DType.F16}}, indent=2)   (or json.dumps(DType.F16))
from __future__ import annotations

import enum
import json
import math
import os
import tempfile
from dataclasses import dataclass


class DType(enum.Enum):
    F32 = "float32"
    F16 = "float16"
    BF16 = "bfloat16"

    @property
    def itemsize(self) -> int:
        return 4 if self is DType.F32 else 2


@dataclass
class Module:
    name: str
    n_params: int
    dtype: DType = DType.F16

    @property
    def nbytes(self) -> int:
        return self.n_params * self.dtype.itemsize


MODULES = [
    Module("model.embed_tokens", 262_144 * 256),
    Module("model.layers.0", 3_000_000),
    Module("model.layers.1", 3_000_000),
    Module("model.layers.2", 3_000_000),
    Module("model.norm", 256, DType.F32),
    Module("lm_head", 262_144 * 256),
]

DEVICE_MAP = {
    "model.embed_tokens": 0,
    "model.layers.0": 0,
    "model.layers.1": 0,
    "model.layers.2": "cpu",
    "model.norm": "cpu",
    "lm_head": "disk",
}

MAX_MEMORY = {0: 200 * 2**20, "cpu": 64 * 2**20}


class OffloadPlanner:
    def __init__(self, modules: list[Module], device_map: dict[str, int | str], offload_dir: str):
        self.modules = {m.name: m for m in modules}
        self.device_map = device_map
        self.offload_dir = offload_dir

    def placement(self) -> dict[int | str, list[str]]:
        out: dict[int | str, list[str]] = {}
        for name, device in self.device_map.items():
            out.setdefault(device, []).append(name)
        return out

    def check_budget(self, max_memory: dict[int | str, int]) -> list[str]:
        problems = []
        for device, names in self.placement().items():
            if device == "disk":
                continue
            used = sum(self.modules[n].nbytes for n in names)
            if used > max_memory.get(device, math.inf):
                problems.append(f"{device}: {used / 2**20:.1f} MiB over budget")
        return problems

    def index_entries(self) -> dict[str, dict]:
        entries = {}
        for name, device in self.device_map.items():
            if device != "disk":
                continue
            module = self.modules[name]
            entries[name] = {"dtype": module.dtype, "shape": [module.n_params]}
        return entries

    def write_index(self) -> str:
        index = self.index_entries()
        text = json.dumps(index, indent=2)  # FAILING LINE: the dtype is an Enum, not its value
        path = os.path.join(self.offload_dir, "index.json")
        with open(path, "w") as fh:
            fh.write(text)
        return path


def human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024:
            return f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} TiB"


def report(planner: OffloadPlanner) -> None:
    for device, names in planner.placement().items():
        total = sum(planner.modules[n].nbytes for n in names)
        print(f"{device!s:>5}: {len(names)} modules, {human(total)}")


def main() -> None:
    with tempfile.TemporaryDirectory() as offload_dir:
        planner = OffloadPlanner(MODULES, DEVICE_MAP, offload_dir)
        report(planner)
        for problem in planner.check_budget(MAX_MEMORY):
            print("warning:", problem)
        path = planner.write_index()
        print("offload index written to", path)
        print(open(path).read())


if __name__ == "__main__":
    main()
