"""Compare an interpreter's environment with a stored env.json: what a maintainer checks first.

Both sides are env.json dicts (the current one freshly captured and scrubbed the same way), so
paths compare equal when only the user's home differs. Differences are grouped so the ones
that usually change a failure (the stack, torch's build, the GPU) come before the rest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.env.probe import stack_names

# Groups, in the order they are reported.
GROUPS = ("python", "stack", "torch", "gpu", "bitsandbytes", "platform", "config", "env", "distributions")


@dataclass(frozen=True)
class Difference:
    group: str
    field: str
    stored: Any
    current: Any

    def one_line(self) -> str:
        return f"{self.field}: {_show(self.stored)} → {_show(self.current)}"

    def to_dict(self) -> dict:
        return {"group": self.group, "field": self.field, "stored": self.stored, "current": self.current}


def _show(v: Any) -> str:
    if v is None:
        return "absent"
    return str(v)


def _get(d: dict, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def _install(pkg: dict | None) -> tuple | None:
    """A package's identity: version plus where it came from (a git commit is a different build)."""
    if not pkg or not pkg.get("installed"):
        return None
    kind = pkg.get("kind") or "index"
    src = pkg.get("commit") if kind == "vcs" else None
    return (pkg.get("version"), kind, src)


def _pkg_text(t: tuple | None) -> str | None:
    if t is None:
        return None
    version, kind, src = t
    if kind == "index":
        return version
    return f"{version} ({kind}{' ' + src[:12] if src else ''})"


def compare(stored: dict, current: dict) -> list[Difference]:
    diffs: list[Difference] = []

    def add(group: str, name: str, a: Any, b: Any) -> None:
        if a != b:
            diffs.append(Difference(group, name, a, b))

    add("python", "python", _get(stored, "python", "version"), _get(current, "python", "version"))
    add("python", "python implementation", _get(stored, "python", "implementation"),
        _get(current, "python", "implementation"))
    recorded = set(stored.get("packages") or {}) | set(current.get("packages") or {})
    stack = stack_names()
    names = stack + sorted(recorded - set(stack))
    for name in names:
        a = _install(_get(stored, "packages", name))
        b = _install(_get(current, "packages", name))
        add("stack", name, _pkg_text(a), _pkg_text(b))
        ia, ib = _get(stored, "packages", name, "import"), _get(current, "packages", name, "import")
        if (ia or ib) and ia != ib and a and b:
            add("stack", f"{name} import", ia, ib)
    for key, label in (("cuda_built", "torch CUDA build"), ("hip_built", "torch ROCm build"),
                       ("cudnn", "cuDNN"), ("cuda_available", "CUDA available"), ("accelerator", "accelerator")):
        add("torch", label, _get(stored, "torch", key), _get(current, "torch", key))
    ga = [g.get("name") for g in _get(stored, "gpu", "gpus") or []]
    gb = [g.get("name") for g in _get(current, "gpu", "gpus") or []]
    add("gpu", "GPUs", ", ".join(ga) or None, ", ".join(gb) or None)
    add("gpu", "NVIDIA driver", _get(stored, "gpu", "driver_version"), _get(current, "gpu", "driver_version"))

    def lib(env: dict) -> str | None:
        path = _get(env, "bitsandbytes", "library")
        return str(path).replace("\\", "/").rsplit("/", 1)[-1] if path else None
    add("bitsandbytes", "bitsandbytes native library", lib(stored), lib(current))
    for key in ("system", "machine", "libc"):
        add("platform", f"platform {key}", _get(stored, "platform", key), _get(current, "platform", key))
    add("platform", "CPU count", _get(stored, "cpu", "count"), _get(current, "cpu", "count"))
    add("config", "accelerate default config", _get(stored, "accelerate_config", "config")
        if _get(stored, "accelerate_config", "found") else None,
        _get(current, "accelerate_config", "config") if _get(current, "accelerate_config", "found") else None)
    ea, eb = stored.get("env_vars") or {}, current.get("env_vars") or {}
    for name in sorted(set(ea) | set(eb)):
        add("env", f"${name}", ea.get(name), eb.get(name))
    da, db = stored.get("distributions") or {}, current.get("distributions") or {}
    shown = {n.lower() for n in names}
    for name in sorted(set(da) | set(db), key=str.lower):
        if name.lower().replace("-", "_") in shown or name.lower() in shown:
            continue
        add("distributions", name, da.get(name), db.get(name))
    return sorted(diffs, key=lambda d: GROUPS.index(d.group))


def summary(diffs: list[Difference]) -> str:
    if not diffs:
        return "no differences"
    groups = sorted({d.group for d in diffs}, key=GROUPS.index)
    return f"{len(diffs)} difference(s) in: {', '.join(groups)}"
