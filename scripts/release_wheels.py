"""The released wheels the catalogues under bot/data/ are built from: which releases, and their sources.

scripts/build_raise_sites.py and scripts/build_signatures.py read the same spread of releases
(2022-2026 for most packages, 2023-2026 for trl), so both catalogues speak of the same versions.
Wheels are taken from a folder (file names ``<pkg>-<version>-*.whl``) or downloaded into one with
``pip download --no-deps``; a wheel's source is read from the zip, never imported.
"""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Iterable, Iterator

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.upstream.raise_sites import release_key  # noqa: E402

VERSIONS = {
    "transformers": ["4.24.0", "4.28.1", "4.31.0", "4.34.1", "4.37.2", "4.40.2", "4.44.2", "4.47.1", "4.51.3",
                     "4.55.4", "4.57.6", "5.5.4", "5.23.0"],
    "peft": ["0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.2", "0.7.1", "0.8.2", "0.10.0", "0.12.0", "0.14.0", "0.17.1",
             "0.21.2"],
    "accelerate": ["0.15.0", "0.18.0", "0.20.3", "0.23.0", "0.27.2", "0.30.1", "0.34.2", "1.2.1", "1.6.0", "1.10.1",
                   "1.15.0"],
    "bitsandbytes": ["0.35.4", "0.37.2", "0.39.1", "0.41.3.post2", "0.42.0", "0.43.3", "0.45.5", "0.48.2", "0.50.2"],
    # 2023-06 .. 2026: SFT/DPO arrived early, the *Config dataclasses from 0.8, 1.x in 2026.
    "trl": ["0.4.7", "0.7.4", "0.8.6", "0.11.4", "0.13.0", "0.16.1", "0.19.1", "0.23.1", "0.29.1", "1.4.0", "1.16.0"],
}

Release = tuple[str, str, Iterable[tuple[str, str]]]   # (package, version, its (file name, source) pairs)


def check_against_registry(versions: dict[str, list[str]]) -> None:
    """Every package listed here must be a stack target's package (bot/targets is the one list of
    them): a renamed or dropped target should fail the build, not leave a stale catalogue."""
    from bot.targets import registry

    known = {p for t in registry.targets() if not t.foundation for p in t.packages}
    stray = sorted(set(versions) - known)
    if stray:
        raise SystemExit(f"release_wheels: {', '.join(stray)} is not a package of a registered target")


def wheel_sources(pkg: str, wheel: Path) -> Iterator[tuple[str, str]]:
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith(f"{pkg}/") and name.endswith(".py"):
                yield name, zf.read(name).decode("utf-8", "replace")


def releases(folder: Path, versions: dict[str, list[str]] = VERSIONS, who: str = "release_wheels") -> list[Release]:
    """The wheels in ``folder``, oldest release first per package."""
    found = []
    for pkg, vs in versions.items():
        for v in sorted(vs, key=release_key):
            hits = sorted(folder.glob(f"{pkg}-{v}-*.whl"))
            if not hits:
                raise SystemExit(f"{who}: no wheel for {pkg}=={v} in {folder}")
            found.append((pkg, v, wheel_sources(pkg, hits[0])))
    return found


def download(folder: Path, versions: dict[str, list[str]] = VERSIONS) -> None:
    # One release per pip call: pip's resolver refuses two versions of one package in one call.
    for pkg, vs in versions.items():
        for v in vs:
            if any(folder.glob(f"{pkg}-{v}-*.whl")):
                continue
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q",
                            "-d", str(folder), f"{pkg}=={v}"], check=True)
