"""An entry's environment: the base venv's interpreter plus an overlay of the releases it was
reported on.

The overlay is reprobot's own (`bot.rerun.environments.overlay_environment`: the base, with a
folder of pinned releases first on PYTHONPATH, cached under `REPROBOT_ENV_CACHE`). What this
module adds is where the wheels come from: a folder outside the repository
(`~/.cache/reprobot-realbugs/wheels`, or `REALBUGS_WHEELS`) that the overlay installs from with
`--no-index --find-links`, so that once an entry has been built its rebuild needs no network.

The pins are closed before the overlay sees them. A set whose wheels are all cached and whose
declared requirements (read from each wheel's METADATA) the pins and the base meet is used as it
is, offline. Otherwise pip resolves it against the base (`pip install --dry-run --report`: what
the base has is kept where it fits, as in the overlay) and the wheels of what it would install are
downloaded. An entry's `extra_pins` are what that closure added on its reported releases (and
what had to be pinned for them to import, such as a PEFT the base's newer one would break);
writing them down makes the rebuild exact and offline.
"""
from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bot.rerun.environments import (Environment, Installed, NotInstallable, _pip_error,  # noqa: E402
                                    overlay_environment, probe, requirement)
from bot.rerun.releases import IndexOptions  # noqa: E402

# the project's venv (scripts/setup.sh), else the interpreter running this (a checkout without one)
BASE_PYTHON = os.environ.get("REALBUGS_PYTHON") or next(
    (str(p) for p in [REPO / ".venv" / "bin" / "python"] if p.is_file()), sys.executable)
DOWNLOAD_TIMEOUT = 600.0


def wheels_dir() -> Path:
    return Path(os.environ.get("REALBUGS_WHEELS") or Path.home() / ".cache" / "reprobot-realbugs" / "wheels")


def envs_root() -> Path:
    # reprobot's own variable first, so one setting moves every overlay cache
    return Path(os.environ.get("REPROBOT_ENV_CACHE") or Path.home() / ".cache" / "reprobot-realbugs" / "envs")


@dataclass(frozen=True)
class Wheel:
    name: str           # canonical
    version: str
    path: Path


def local_wheels(folder: Path) -> list[Wheel]:
    out = []
    for p in sorted(folder.glob("*.whl")) if folder.is_dir() else []:
        try:
            name, version, _, _ = parse_wheel_filename(p.name)
        except Exception:        # a file pip would not take either
            continue
        out.append(Wheel(canonicalize_name(name), str(version), p))
    return out


def requires_of(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist lines, read from its METADATA without installing it."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        msg = email.parser.Parser().parsestr(z.read(meta).decode("utf-8", "replace"))
    return msg.get_all("Requires-Dist") or []


def _download(specs: list[str], folder: Path) -> None:
    """Exact releases, without their dependencies (the closure is already made), as wheels for this Python."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
           "--only-binary=:all:", "-d", str(folder), *specs]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise NotInstallable(f"downloading {' '.join(specs)} took over {DOWNLOAD_TIMEOUT:.0f}s") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.startswith("ERROR")]
        raise NotInstallable((lines[0] if lines else f"pip download {' '.join(specs)} failed")[:300])


def unmet(pins: dict[str, str], base: Installed, folder: Path) -> list[str] | None:
    """Requirements of the pinned wheels that neither a pin nor the base meets; None when a pinned
    wheel is not in `folder` yet."""
    env = {"python_version": base.python, "python_full_version": base.full_python, "extra": ""}
    cached = local_wheels(folder)
    wheels = {}
    for name, version in pins.items():
        match = [w for w in cached if w.name == canonicalize_name(name) and w.version == version]
        if not match:
            return None
        wheels[name] = match[0]
    missing = []
    for owner, wheel in sorted(wheels.items()):
        for text in requires_of(wheel.path):
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            name = canonicalize_name(req.name)
            version = next((v for k, v in pins.items() if canonicalize_name(k) == name), None) or base.version(name)
            try:
                ok = version is not None and req.specifier.contains(version, prereleases=True)
            except InvalidVersion:
                ok = True
            if not ok:
                missing.append(f"{owner} needs {req.name}{req.specifier}")
    return missing


_UV_ADD = re.compile(r"^\s*\+\s*([A-Za-z0-9_.\-]+)==(\S+)\s*$", re.MULTILINE)


def excluded_by_base(name: str, version: str, base: Installed, pinned: set[str]) -> bool:
    """Does a requirement of a base package that stays (not pinned) rule this release out? An
    extra pin made for an old release (huggingface-hub 0.x beside transformers 4.x) must give way
    when the swap brings back the base's own release, which needs another."""
    env = {"python_version": base.python, "python_full_version": base.full_python, "extra": ""}
    key = canonicalize_name(name)
    pinned = {canonicalize_name(p) for p in pinned}
    for owner, info in base.dists.items():
        if owner in pinned or owner == key:
            continue
        for text in info.get("requires", []):
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) != key or (req.marker is not None and not req.marker.evaluate(env)):
                continue
            try:
                if not req.specifier.contains(version, prereleases=True):
                    return True
            except InvalidVersion:
                continue
    return False


def pip_resolve(requirements: list[str], base_python: str) -> dict[str, str]:
    """What would be installed into the base for these requirements (a dry run: nothing changes).
    What the base already has is kept where it fits, as in the overlay, and a newest release that
    would not fit is backtracked from; wheels only, so nothing is built to read its metadata.
    uv answers in seconds where pip fetches index pages one by one, so uv is used when on PATH."""
    uv = shutil.which("uv")
    with tempfile.TemporaryDirectory(prefix="realbugs-resolve-") as tmp:
        report = Path(tmp) / "report.json"
        if uv:
            cmd = [uv, "pip", "install", "--dry-run", "--python", base_python, "--only-binary", ":all:", *requirements]
        else:
            cmd = [base_python, "-m", "pip", "install", "--dry-run", "--quiet", "--disable-pip-version-check",
                   "--only-binary=:all:", "--report", str(report), *requirements]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise NotInstallable(f"resolving {' '.join(requirements)} took over {DOWNLOAD_TIMEOUT:.0f}s") from None
        if proc.returncode != 0:
            raise NotInstallable(_pip_error(proc.stderr + "\n" + proc.stdout))
        if uv:
            return {canonicalize_name(n): v for n, v in _UV_ADD.findall(proc.stderr + "\n" + proc.stdout)}
        data = json.loads(report.read_text())
    return {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in data.get("install", [])}


def close_pins(hard: dict[str, str], soft: dict[str, str], base: Installed, folder: Path,
               base_python: str = BASE_PYTHON, online: bool = True) -> dict[str, str]:
    """The whole set of releases to overlay: `hard` exactly, `soft` exactly where that resolves
    (else as a floor, else left to the resolver), and what they need that the base lacks.
    A set whose wheels are all cached and whose requirements are all met is used as it is, with
    no network; otherwise pip resolves it and the wheels are downloaded."""
    soft = {k: v for k, v in soft.items() if not excluded_by_base(k, v, base, set(hard))}
    pins = {**soft, **hard}
    if unmet(pins, base, folder) == []:
        return pins
    if not online:
        raise NotInstallable(f"not all wheels for {pins} are cached in {folder}, and --offline was given")
    hard_reqs = [requirement(k, v) for k, v in sorted(hard.items())]
    attempts = [hard_reqs + [requirement(k, v) for k, v in sorted(soft.items())]]
    if soft:
        attempts.append(hard_reqs + [f"{k}>={v}" for k, v in sorted(soft.items())])
        attempts.append(hard_reqs)
    why = None
    for reqs in attempts:
        try:
            resolved = pip_resolve(reqs, base_python)
            break
        except NotInstallable as e:
            why = why or e
    else:
        raise why
    cached = local_wheels(folder)
    missing = [f"{n}=={v}" for n, v in sorted(resolved.items())
               if not any(w.name == n and w.version == v for w in cached)]
    if missing:
        _download(missing, folder)
    return resolved


def build(hard: dict[str, str], soft: dict[str, str] | None = None, *, online: bool = True,
          base_python: str = BASE_PYTHON) -> Environment:
    """The environment for these pins: closed, wheels cached, overlay built (or reused)."""
    base = probe(base_python, [])
    folder = wheels_dir()
    # a pin equal to the base's release is no pin (torch stays the base's)
    hard = {canonicalize_name(k): v for k, v in hard.items() if base.version(k) != v}
    soft = {canonicalize_name(k): v for k, v in (soft or {}).items()
            if base.version(k) != v and canonicalize_name(k) not in hard}
    pins = close_pins(hard, soft, base, folder, base_python, online)
    index = IndexOptions(("--no-index", "--find-links", str(folder)))
    return overlay_environment(base_python, base, pins, index, envs_root())


def entry_pins(entry: dict, swap: tuple[str, str] | None = None,
               also: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(hard, soft) pins of an entry: its reported releases are hard and its extra pins soft; with
    `swap` (package, release) that one package is replaced and the extra pins may move to fit it.
    `also` replaces further reported releases in every row (a newer trl that needs a newer
    transformers than the one reported)."""
    hard = dict(entry.get("reported_on") or {})
    soft = dict(entry.get("extra_pins") or {})
    if swap is None and not also:
        return {**hard, **soft}, {}
    changes = dict(also or {})
    if swap is not None:
        changes[swap[0]] = swap[1]
    names = {canonicalize_name(k) for k in changes}
    hard = {k: v for k, v in hard.items() if canonicalize_name(k) not in names}
    hard.update(changes)
    return hard, soft


_SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*=\s*(.+)$")


def parse_release_list(text: str) -> tuple[str, list[str]]:
    """`transformers=4.42.0,4.42.4` -> ("transformers", ["4.42.0", "4.42.4"])."""
    m = _SPEC.match(text)
    if not m:
        raise ValueError(f"--releases {text!r}: expected PKG=V1,V2,...")
    versions = [v.strip() for v in m.group(2).split(",") if v.strip()]
    if not versions:
        raise ValueError(f"--releases {text!r}: no releases listed")
    return m.group(1), versions
