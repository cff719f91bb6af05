"""Throwaway environments for re-running a repro against other releases.

An environment is the user's interpreter (the *base*, which the repro failed in) plus an
*overlay*: a folder, first on PYTHONPATH, holding the releases that differ. A lock is a whole
dependency closure, so its pins install with `--no-deps`; a swapped release whose declared
requirements the base does not meet gets those requirements installed too, a few rounds, each at
the release closest to the user's environment that satisfies it (the one contemporary with the
swapped release, bot/rerun/requirement_choice.py), and if that still leaves one unmet the row
says so instead of running something that was never a consistent environment. Overlays are
cached under the user's cache dir, keyed by the base and the exact set of pins, and reused.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bot.rerun.releases import IndexOptions
from bot.rerun.requirement_choice import NEWEST, Choice, Chooser

# Runs in the user's interpreter, stdlib only: installed versions (first on sys.path wins, as for
# an import) and the requirements each one declares.
_VERSIONS_PROBE = r"""
import importlib.metadata as md, json, re, sys
seen = {}
for dist in md.distributions():
    name = dist.metadata.get("Name") or ""
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key and key not in seen:
        seen[key] = {"version": dist.version, "requires": list(dist.requires or [])}
print(json.dumps({"python": "%d.%d" % sys.version_info[:2], "full_python": sys.version.split()[0],
                  "dists": seen}))
"""

INSTALL_TIMEOUT = 900.0
RESOLVE_ROUNDS = 3


class NotInstallable(Exception):
    """A release set that cannot be installed here; its message is the row's one line."""


@dataclass
class Installed:
    python: str
    full_python: str
    dists: dict[str, dict]          # canonical name -> {"version", "requires"}

    def version(self, name: str) -> str | None:
        d = self.dists.get(canonicalize_name(name))
        return d["version"] if d else None


def probe(python: str, pythonpath: list[str], timeout: float = 120.0) -> Installed:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(pythonpath + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([python, "-c", _VERSIONS_PROBE], capture_output=True, text=True,
                          timeout=timeout, env=env)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise NotInstallable(f"the interpreter could not list its packages: {tail[:160]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return Installed(data["python"], data["full_python"], data["dists"])


@dataclass
class Environment:
    """What a row runs with: the base interpreter and the overlay folders before its site-packages."""
    python: str
    pythonpath: list[str]
    pins: dict[str, str] = field(default_factory=dict)     # what the overlay installed
    reused: bool = False
    note: str = ""            # how the requirements it added were chosen (requirement_choice.py)

    def added(self, asked: dict[str, str]) -> dict[str, str]:
        """What the overlay installed beyond `asked`: the requirements it met for them."""
        names = {canonicalize_name(n) for n in asked}
        return {n: v for n, v in self.pins.items() if canonicalize_name(n) not in names}

    def env(self) -> dict[str, str]:
        inherited = os.environ.get("PYTHONPATH")
        return {"PYTHONPATH": os.pathsep.join(self.pythonpath + ([inherited] if inherited else []))}


def cache_root() -> Path:
    override = os.environ.get("REPROBOT_ENV_CACHE")
    if override:
        return Path(override)
    import platformdirs
    return Path(platformdirs.user_cache_dir("reprobot")) / "envs"


def _installer_cmd(python: str, python_version: str, target: Path, index: IndexOptions) -> list[str]:
    common = ["--target", str(target), "--no-deps", *index.pip_args()]
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--python", python, *common]
    has_pip = subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0
    if has_pip:
        return [python, "-m", "pip", "install", "--disable-pip-version-check", *common]  # not -q: the conflict lines are info
    # A venv without pip (made by uv, say): reprobot's pip installs wheels for that Python.
    return [sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
            "--only-binary=:all:", "--python-version", python_version, *common]


def _pip_error(output: str) -> str:
    """The installer's reason in one line. A resolution failure names the conflicting
    requirements (pip's "The conflict is caused by:" lines, uv's "No solution found" chain);
    pip's closing "ResolutionImpossible: for help visit ..." says nothing, so it is never the reason."""
    raw = output.splitlines()
    conflict = _conflict(raw)
    if conflict:
        return conflict
    lines = [ln.strip() for ln in raw
             if ln.strip() and not ln.lstrip().startswith(("WARNING", "[notice]", "note:", "hint:"))
             and "for help visit" not in ln]
    for ln in lines:
        if ln.startswith("ERROR:"):
            return ln.removeprefix("ERROR:").strip()[:300]
    for ln in reversed(lines):
        if "error" in ln.lower():
            return ln.strip()[:300]
    return (lines[-1] if lines else "the installer failed without a message")[:300]


def _conflict(lines: list[str]) -> str | None:
    for i, ln in enumerate(lines):
        if "The conflict is caused by:" in ln:          # pip
            causes = []
            for nxt in lines[i + 1:]:
                if not nxt.strip():
                    break
                causes.append(nxt.strip())
            return ("conflicting requirements: " + "; ".join(causes))[:400] if causes else None
        if "No solution found when resolving" in ln:    # uv: a chain of "Because ..." sentences
            chain = " ".join(n.strip().lstrip("╰─▶│├ ").strip() for n in lines[i + 1:] if n.strip())
            return ("conflicting requirements: " + chain)[:400] if chain else None
    return None


def _install(cmd: list[str], reqs: list[str]) -> None:
    try:
        proc = subprocess.run(cmd + reqs, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise NotInstallable(f"installing {' '.join(reqs)} took over {INSTALL_TIMEOUT:.0f}s") from None
    if proc.returncode != 0:
        raise NotInstallable(_pip_error(proc.stderr + "\n" + proc.stdout))


def unmet_requirements(installed: Installed, names: list[str]) -> list[str]:
    """Requirements declared by `names` that the combined environment does not satisfy."""
    from packaging.requirements import InvalidRequirement
    from packaging.version import InvalidVersion
    env = {"python_version": installed.python, "python_full_version": installed.full_python,
           "extra": ""}
    unmet = []
    for name in names:
        info = installed.dists.get(canonicalize_name(name))
        for text in (info or {}).get("requires", []):
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            have = installed.version(req.name)
            try:
                ok = have is not None and req.specifier.contains(have, prereleases=True)
            except InvalidVersion:
                ok = True
            if not ok:
                unmet.append(str(Requirement(f"{req.name}{req.specifier}")))
    return sorted(set(unmet))


def requirement(name: str, value: str) -> str:
    """`value` is an exact version, or a VCS/URL reference (`git+https://...@ref`)."""
    return f"{name} @ {value}" if "://" in value else f"{name}=={value}"


def key_for(base_python: str, base: Installed, pins: dict[str, str], index: IndexOptions) -> str:
    fingerprint = {k: v["version"] for k, v in sorted(base.dists.items())}
    blob = json.dumps([os.path.realpath(base_python), base.full_python, fingerprint,
                       sorted(pins.items()), index.pip_args()], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def overlay_environment(base_python: str, base: Installed, pins: dict[str, str], index: IndexOptions,
                        root: Path | None = None) -> Environment:
    """The base with `pins` on top (name -> exact version); NotInstallable says why not."""
    if not pins:
        return Environment(base_python, [], {}, reused=True)
    root = root or cache_root()
    folder = root / key_for(base_python, base, pins, index)
    done = folder / ".reprobot-complete"
    chosen_file = folder / CHOSEN
    # Named site-packages so that tracebacks through it read as library frames, as in the base.
    if reusable(folder, pins):
        note = json.loads(chosen_file.read_text()).get("note", "") if chosen_file.is_file() else ""
        return Environment(base_python, [str(folder / "site-packages")], json.loads(done.read_text()),
                           reused=True, note=note)
    work = folder.with_name(folder.name + f".partial-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    site = work / "site-packages"
    site.mkdir(parents=True)
    try:
        cmd = _installer_cmd(base_python, base.python, site, index)
        _install(cmd, [requirement(name, value) for name, value in sorted(pins.items())])
        names = {canonicalize_name(n) for n in pins}
        chooser = Chooser(base.python, index, pins)
        chosen: list[Choice] = []
        for round_ in range(RESOLVE_ROUNDS + 1):
            now = probe(base_python, [str(site)])
            unmet = unmet_requirements(now, sorted(names))
            if not unmet:
                break
            if round_ == RESOLVE_ROUNDS:
                raise NotInstallable("requirements not met: " + ", ".join(unmet)[:180])
            picks = chooser.choose(unmet, now.version)
            _install_chosen(cmd, picks, unmet)
            chosen += picks
            names |= {canonicalize_name(Requirement(r).name) for r in unmet}
        installed_pins = {n: now.version(n) or "?" for n in sorted(names)}
        note = chosen_note(chosen, installed_pins)
        (work / CHOSEN).write_text(json.dumps({"note": note, "chosen": [asdict(c) for c in chosen]}))
        (work / ".reprobot-complete").write_text(json.dumps(installed_pins))
        shutil.rmtree(folder, ignore_errors=True)
        work.rename(folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return Environment(base_python, [str(folder / "site-packages")], installed_pins, note=note)


CHOSEN = ".reprobot-requirements"      # how the requirements an overlay added were chosen


def reusable(folder: Path, pins: dict[str, str]) -> bool:
    """A complete cached overlay, unless it added requirements before they were chosen (it took the
    newest matching, which the swapped release may never have run with): that one is built again.
    One that added none is what it would be now."""
    done = folder / ".reprobot-complete"
    if not done.is_file():
        return False
    added = set(json.loads(done.read_text())) - {canonicalize_name(n) for n in pins}
    return not added or (folder / CHOSEN).is_file()


def _install_chosen(cmd: list[str], picks: list[Choice], unmet: list[str]) -> None:
    """The chosen releases; when they do not install, what the installer picks for the specifiers
    (its newest matching), and the picks say so."""
    if not any(c.version for c in picks):
        _install(cmd, unmet)
        return
    try:
        _install(cmd, [c.requirement() for c in picks])
    except NotInstallable as e:
        _install(cmd, unmet)
        for c in picks:
            if c.version:
                c.why = f"{c.name} {c.version} did not install ({str(e)[:80]})"
                c.version, c.how = None, NEWEST


def chosen_note(chosen: list[Choice], installed: dict[str, str]) -> str:
    """One line: each requirement the overlay added, its release and how it was chosen."""
    if not chosen:
        return ""
    return "requirements: " + "; ".join(c.words(installed.get(c.name)) for c in chosen)
