"""Which releases of a package exist, as the package index (or a --find-links folder) lists them.

The listing goes through pip's own finder (`pip index versions`), so yanked files, pre-releases
and releases whose `Requires-Python` excludes the user's Python are filtered exactly as an
install would filter them, and the user's pip configuration (mirrors, constraints) applies.
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version


@dataclass(frozen=True)
class IndexOptions:
    """Where packages come from: `--index-url`, `--find-links DIR`, `--no-index`, `--pre`."""
    args: tuple[str, ...] = ()
    pre: bool = False

    def pip_args(self) -> list[str]:
        return list(self.args) + (["--pre"] if self.pre else [])


@dataclass
class Releases:
    name: str
    versions: list[str] = field(default_factory=list)   # oldest first
    error: str | None = None

    @property
    def latest(self) -> str | None:
        return self.versions[-1] if self.versions else None

    def between(self, low: str | None, high: str | None) -> list[str]:
        """Releases in [low, high], both ends included when listed, oldest first."""
        lo = Version(low) if low else None
        hi = Version(high) if high else None
        return [v for v in self.versions if (lo is None or Version(v) >= lo) and (hi is None or Version(v) <= hi)]


_AVAILABLE = re.compile(r"^Available versions:\s*(.*)$", re.MULTILINE)


def list_releases(name: str, python_version: str, index: IndexOptions, timeout: float = 120.0) -> Releases:
    cmd = [sys.executable, "-m", "pip", "index", "versions", name, "--python-version", python_version,
           "--disable-pip-version-check", *index.pip_args()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Releases(name, error=f"the package index did not answer within {timeout:.0f}s")
    found = _AVAILABLE.search(proc.stdout)
    if proc.returncode != 0 or not found:
        last = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
        why = last[-1].strip() if last else f"pip exited {proc.returncode}"
        return Releases(name, error=f"release list unavailable: {why[:160]}")
    versions = []
    for v in found.group(1).split(","):
        try:
            versions.append(Version(v.strip()))
        except InvalidVersion:
            continue
    return Releases(name, [str(v) for v in sorted(set(versions))])
