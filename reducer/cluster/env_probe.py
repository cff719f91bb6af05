"""What a node's interpreter is, for the one check that keeps verdicts honest on a cluster: a
candidate's verdict only counts when it ran in the same Python and the same versions of the
script's stack as the local runs (the original's failure was confirmed here).

The probe runs the user's interpreter itself (never the one reprobot runs in), with the
environment the candidates get, so a node whose PYTHONPATH or site-packages holds another
version of a package is seen as the candidates would see it."""
from __future__ import annotations

import ast
import json
import subprocess
from dataclasses import dataclass, field
from typing import Any

# Run by the user's interpreter: its version, and the version of each distribution that provides
# one of the given top-level modules (importlib.metadata, nothing imported).
_PROBE = r"""
import json, sys
try:
    from importlib import metadata
except ImportError:
    metadata = None
mods = json.loads(sys.argv[1])
out = {"python": sys.version.split()[0], "implementation": sys.implementation.name, "packages": {}}
if metadata is not None:
    dists = metadata.packages_distributions() if hasattr(metadata, "packages_distributions") else {}
    for mod in mods:
        for name in dists.get(mod, []):
            try:
                out["packages"][name.lower()] = metadata.version(name)
            except Exception:
                out["packages"][name.lower()] = None
print(json.dumps(out))
"""

PROBE_TIMEOUT = 120.0


@dataclass
class EnvProbe:
    python: str                    # "3.11.9"
    implementation: str = "cpython"
    packages: dict[str, str | None] = field(default_factory=dict)   # distribution -> version

    def to_dict(self) -> dict[str, Any]:
        return {"python": self.python, "implementation": self.implementation, "packages": dict(self.packages)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EnvProbe":
        return cls(str(d["python"]), str(d.get("implementation") or "cpython"), dict(d.get("packages") or {}))


def top_level_modules(source: str) -> list[str]:
    """The top-level names the script imports (absolute imports, anywhere in it): the stack whose
    versions must agree. The standard library is in there too; it has no distribution and so
    drops out of the probe."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    names.discard("__future__")
    return sorted(names)


def probe(python: str, modules: list[str], env: dict[str, str] | None = None) -> EnvProbe:
    """The interpreter's version and its distributions' versions for ``modules``. Raises
    RuntimeError with one line when the interpreter cannot be run."""
    try:
        proc = subprocess.run([python, "-c", _PROBE, json.dumps(modules)], capture_output=True, text=True,
                              env=env, timeout=PROBE_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"cannot run {python}: {e}") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{python} failed the environment probe: {tail}")
    return EnvProbe.from_dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def differences(local: EnvProbe, remote: EnvProbe) -> list[str]:
    """What differs, as short phrases ("transformers 5.5.0 here, 5.4.0 there"); [] when nothing."""
    out: list[str] = []
    if (local.implementation, local.python) != (remote.implementation, remote.python):
        out.append(f"Python {local.implementation} {local.python} here, {remote.implementation} {remote.python} there")
    for name in sorted(set(local.packages) | set(remote.packages)):
        here, there = local.packages.get(name), remote.packages.get(name)
        if here != there:
            out.append(f"{name} {here or 'missing'} here, {there or 'missing'} there")
    return out
