"""requirements.in and requirements.lock for a repro: the environment it failed in, pinned.

- requirements.in: the distributions the repro actually imported (the modules loaded in its
  run, mapped to distributions in the user's interpreter), pinned to the installed versions.
  VCS installs are written ``name @ git+URL@<commit>`` (PEP 610 direct_url.json); editable and
  local-path installs cannot be re-created elsewhere and are listed as comments.
- requirements.lock: compiled with pip-tools (``pip-compile --generate-hashes``) from the
  importable part, every version constrained to the one installed, when the index is
  reachable; otherwise a snapshot of the installed dependency closure with a header saying so.
  pip cannot hash VCS requirements, so they are kept below the hashed part as the exact
  commands to run after it, never inside it (that would make ``--require-hashes`` fail).
- torch's local build tag (``+cu129``, ``+cpu``, ``+rocm6.2``) names the index it came from;
  that index is recorded (``--extra-index-url``).
- Ambient pip configuration (pip.conf, PIP_INDEX_URL, find-links, constraints) never leaks:
  pip-compile runs with ``PIP_CONFIG_FILE=os.devnull``, no PIP_* resolution variables, no
  pip-tools config, in an empty folder.

How the imported modules are found: ``modules_launcher_source()`` is a launcher that runs a
script with runpy and, at exit (also when it raises), writes the sorted top-level names of
``sys.modules`` as JSON to the file named by ``$REPROBOT_MODULES_OUT``. Run it as
``python launcher.py repro.py [args...]`` (the Runner's ``launcher=`` argument takes it as is);
``find_imported_modules()`` does exactly that in a scratch copy.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename

from bot.env.probe import run_probe
from bot.scrub import scrub
from bot.store import ReproDir, write_text_atomic
from bot.targets.sysinfo import local_name
from reducer.errors import ExitCode, ReprobotError
from reducer.run.processes import kill_group, resolve_python

DEFAULT_INDEX = "https://pypi.org/simple"
TORCH_INDEX = "https://download.pytorch.org/whl/"
MODULES_ENV = "REPROBOT_MODULES_OUT"
# pip-compile leaves these out unless asked; a hash-checked install then fails on them.
NEVER_ROOTS = {"pip", "setuptools", "wheel", "distribute"}
# Transport settings are kept (a proxy or a corporate CA does not change what resolves);
# everything else pip reads from the environment is dropped.
PIP_TRANSPORT_VARS = {"PIP_CERT", "PIP_CLIENT_CERT", "PIP_PROXY"}
TORCH_FAMILY = {"torch", "torchvision", "torchaudio", "triton", "pytorch-triton-rocm", "pytorch-triton-xpu"}
HASHABLE_KINDS = {"index"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Dist:
    """One installed distribution, as the probe saw it."""

    name: str
    version: str
    kind: str = "index"            # index | vcs | editable | local-dir | archive | <installer>
    installer: str | None = None
    url: str | None = None
    vcs: str | None = None
    commit: str | None = None
    subdirectory: str | None = None
    requires: tuple[str, ...] = ()

    @classmethod
    def from_probe(cls, d: dict) -> "Dist":
        return cls(name=d["name"], version=str(d["version"]), kind=d.get("kind") or "index",
                   installer=d.get("installer"), url=d.get("url"), vcs=d.get("vcs"), commit=d.get("commit"),
                   subdirectory=d.get("subdirectory"), requires=tuple(d.get("requires") or ()))

    @property
    def key(self) -> str:
        return canonical(self.name)

    @property
    def local_name(self) -> str | None:
        """The file or folder name of a local install (file:// URL): never where it sits."""
        return local_name(self.url)

    @property
    def release_copy(self) -> bool:
        """A local copy of one of the index's own release files (a wheel carried onto a machine with
        no network): the same name and version, no local label, so ``name==version`` re-creates it."""
        name = self.local_name
        if self.kind != "archive" or not name or "+" in self.version:
            return False
        try:
            if name.endswith(".whl"):
                dist, version, _, _ = parse_wheel_filename(name)
            else:
                dist, version = parse_sdist_filename(name)
        except (InvalidWheelFilename, InvalidSdistFilename):
            return False
        return canonical(dist) == self.key and str(version) == self.version

    @property
    def hashable(self) -> bool:
        """Can pip-compile fetch this exact version from an index and hash it?"""
        if self.kind in HASHABLE_KINDS or self.release_copy:
            return True
        # Installed by conda & co: worth a try on the index at the same version.
        return self.kind not in ("vcs", "editable", "local-dir", "archive")

    def pin(self) -> str:
        """The requirement line that re-creates this install, or a comment when none can."""
        if self.kind == "vcs" and self.url and self.commit:
            sub = f"#subdirectory={self.subdirectory}" if self.subdirectory else ""
            return f"{self.name} @ {self.vcs or 'git'}+{self.url}@{self.commit}{sub}"
        if self.kind == "archive" and self.url and not self.url.startswith("file:"):
            return f"{self.name} @ {self.url}"
        if self.release_copy:
            return f"{self.name}=={self.version}"
        if self.kind in ("editable", "local-dir", "archive"):
            where = f"a local {'file' if self.kind == 'archive' else 'folder'} ({self.local_name})" if self.local_name else self.url
            return f"# {self.name}=={self.version}  ({self.kind} install from {where}: not reproducible elsewhere)"
        return f"{self.name}=={self.version}"


@dataclass
class LockResult:
    mode: str                      # "compiled" | "snapshot"
    reason: str                    # why a snapshot (empty when compiled)
    roots: list[str]               # distributions in requirements.in
    closure: list[str]             # every distribution pinned (closure of the roots)
    unhashable: list[str] = field(default_factory=list)
    index_urls: list[str] = field(default_factory=list)
    seconds: float = 0.0


# --- which modules the repro imported --------------------------------------------------------

def modules_launcher_source() -> str:
    """A launcher (``python launcher.py script.py args...``) that records the modules loaded.

    It runs the script as ``__main__`` with runpy (its directory first on sys.path, as
    ``python script.py`` would), and at exit, also when the script raises, writes the sorted
    top-level names of ``sys.modules`` as a JSON list to the path in $REPROBOT_MODULES_OUT.
    The script's own exception still propagates, so its traceback is printed as usual.
    """
    return '''\
import atexit, json, os, runpy, sys
_out = os.environ.pop("REPROBOT_MODULES_OUT", None)
def _reprobot_dump_modules():
    if not _out:
        return
    names = sorted({str(m).split(".", 1)[0] for m in list(sys.modules) if m})
    with open(_out, "w", encoding="utf-8") as fh:
        json.dump(names, fh)
atexit.register(_reprobot_dump_modules)
if len(sys.argv) < 2:
    sys.exit("usage: launcher.py script.py [args...]")
_script = os.path.abspath(sys.argv[1])
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(_script)
try:
    runpy.run_path(_script, run_name="__main__")
finally:
    _reprobot_dump_modules()
'''


def find_imported_modules(python: str, script: Path, args: tuple[str, ...] = (), timeout: float = 600.0) -> list[str]:
    """Run ``script`` (in a scratch copy of its folder) under the launcher; the modules it loaded.

    The script is expected to fail: its exit status does not matter, only what it imported.
    """
    if not script.is_file():
        raise ReprobotError(f"{script}: no such script", ExitCode.FILE_MISSING)
    python = resolve_python(python)
    with tempfile.TemporaryDirectory(prefix="reprobot-modules-") as tmp:
        work = Path(tmp) / "work"
        shutil.copytree(script.parent, work, ignore=shutil.ignore_patterns("__pycache__", ".git", "*.lock"))
        launcher = Path(tmp) / "reprobot_launcher.py"
        launcher.write_text(modules_launcher_source(), encoding="utf-8")
        out = Path(tmp) / "modules.json"
        # PYTHONPATH stays, as in the candidates' runs and the env probe: a stack installed with
        # `pip install --target` and put on it (bitsandbytes on the GPU example's device) is what
        # the repro imports, and dropping it left bitsandbytes out of the lock and the install line.
        env = dict(os.environ, **{MODULES_ENV: str(out)})
        try:
            proc = subprocess.Popen([python, str(launcher), str(work / script.name), *args], cwd=work, env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            raise ReprobotError(f"{python}: cannot run this interpreter ({e.strerror})",
                                ExitCode.NO_INTERPRETER) from None
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)    # the script's workers too; nothing was written, reported below
            proc.wait()
        except BaseException:
            kill_group(proc.pid)
            proc.wait()
            raise
        try:
            names = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise ReprobotError(f"{script.name}: could not record the modules it imports (the run was killed "
                                "or timed out); pass them explicitly", ExitCode.BAD_INPUT) from None
    return [str(n) for n in names]


# --- the installed dependency closure --------------------------------------------------------

@dataclass
class Environment:
    """What the lock is computed from: the user's distributions and marker values."""

    dists: dict[str, Dist]
    markers: dict[str, str]
    python_version: str
    module_map: dict[str, list[str]]

    @classmethod
    def probe(cls, python: str, modules: list[str], timeout: float = 120.0) -> "Environment":
        raw = run_probe(python, sections=["python", "distributions", "module_map"], modules=modules,
                        timeout=timeout)
        for name in ("python", "distributions", "module_map"):
            if "probe_error" in raw.get(name, {"probe_error": "missing"}):
                raise ReprobotError(f"{python}: could not list installed distributions "
                                    f"({raw.get(name, {}).get('probe_error', 'missing')})", ExitCode.NO_INTERPRETER)
        dists = {}
        for d in raw["distributions"]["distributions"]:
            dist = Dist.from_probe(d)
            dists[dist.key] = dist
        return cls(dists=dists, markers=raw["python"]["markers"], python_version=raw["python"]["version"],
                   module_map=raw["module_map"])

    def roots_for(self, modules: list[str]) -> list[Dist]:
        roots: dict[str, Dist] = {}
        for mod in modules:
            if mod.startswith("__"):  # __main__, __future__, editable-install finder hooks
                continue
            for name in self.module_map.get(mod.split(".", 1)[0], []):
                dist = self.dists.get(canonical(name))
                if dist and dist.key not in NEVER_ROOTS:
                    roots[dist.key] = dist
        return sorted(roots.values(), key=lambda d: d.key)

    def _wanted(self, req: Requirement, extras: set[str]) -> bool:
        if req.marker is None:
            return True
        try:
            return any(req.marker.evaluate({**self.markers, "extra": e}) for e in ({""} | extras))
        except (InvalidMarker, ValueError, KeyError, TypeError):
            return True  # an unreadable marker: keep the dependency rather than lose it

    def closure(self, roots: list[Dist]) -> tuple[list[Dist], list[str]]:
        """Roots plus every installed dependency (markers evaluated for the user's interpreter).

        Also returns the requirements that are declared but not installed.
        """
        seen: dict[str, set[str]] = {}
        missing: list[str] = []
        stack: list[tuple[str, set[str]]] = [(r.key, set()) for r in roots]
        while stack:
            key, extras = stack.pop()
            if key in seen and extras <= seen[key]:
                continue
            seen[key] = seen.get(key, set()) | extras
            for line in self.dists[key].requires:
                try:
                    req = Requirement(line)
                except InvalidRequirement:
                    continue
                if not self._wanted(req, seen[key]):
                    continue
                dep = canonical(req.name)
                if dep not in self.dists:
                    missing.append(f"{req.name} (required by {self.dists[key].name})")
                    continue
                stack.append((dep, set(req.extras)))
        dists = sorted((self.dists[k] for k in seen), key=lambda d: d.key)
        return dists, sorted(set(missing))


def torch_index(dists: list[Dist]) -> str | None:
    """The PyTorch index a local-tagged torch build comes from (+cu129 → .../whl/cu129)."""
    for d in dists:
        if d.key == "torch" and "+" in d.version:
            tag = d.version.split("+", 1)[1]
            if re.fullmatch(r"cu\d+|cpu|rocm[\d.]+|xpu", tag):
                return TORCH_INDEX + tag
    return None


# --- writing the files -----------------------------------------------------------------------

def render_requirements_in(roots: list[Dist], extra_index: str | None, python_version: str, modules: int) -> str:
    lines = ["# requirements.in — written by reprobot: the distributions the repro imports",
             f"# ({modules} top-level module(s) loaded in its run, mapped to distributions), pinned to the",
             f"# versions installed in the failing environment (Python {python_version}).",
             "# requirements.lock next to it pins their whole dependency closure."]
    if extra_index:
        lines.append(f"--extra-index-url {extra_index}")
    lines += [d.pin() for d in roots]
    return "\n".join(lines) + "\n"


def _unhashable_block(dists: list[Dist]) -> list[str]:
    direct = [d for d in dists if not d.hashable]
    if not direct:
        return []
    lines = ["", "# ---- Not hash-pinnable: pip cannot hash VCS or local installs. After the hashed install",
             "# above, install these (their dependencies are pinned above; where a package above needs",
             "# one of them, a release of it is pinned above and the line below replaces it):"]
    for d in direct:
        pin = d.pin()
        lines.append(f"#   python -m pip install --no-deps \"{pin}\"" if not pin.startswith("#") else pin)
    return lines


def _clean_pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in PIP_TRANSPORT_VARS}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    env.pop("PIP_TOOLS_CACHE_DIR", None)
    return env


def index_reachable(index_url: str, timeout: float = 10.0) -> str | None:
    """None when the index answers; else a one-line reason."""
    url = index_url.rstrip("/") + "/pip/"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return None
    except urllib.error.HTTPError as e:
        # 404: an index without that project still answers; 403/5xx: a proxy or an outage.
        return None if e.code == 404 else f"{index_url} answered HTTP {e.code}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return f"{index_url} is not reachable ({reason})"


class CompileError(Exception):
    pass


def _constraint(d: Dist) -> str:
    if d.hashable:
        return f"{d.name}=={d.version}"
    # A VCS or local install that an index package depends on (peft needs accelerate): the
    # hashed part needs some release of it, so the closest one not above the installed version;
    # the line kept below the hashed part then replaces it.
    return f"{d.name}<={d.version.split('+', 1)[0]}"


def compile_lock(hashed: list[Dist], constraints: list[Dist], index_url: str, extra_index: str | None,
                 timeout: float = 600.0) -> str:
    """pip-compile --generate-hashes of ``hashed`` (pinned), constrained to ``constraints``; the text."""
    with tempfile.TemporaryDirectory(prefix="reprobot-lock-") as tmp:
        work = Path(tmp)
        (work / "requirements.in").write_text("\n".join(f"{d.name}=={d.version}" for d in hashed) + "\n",
                                              encoding="utf-8")
        (work / "constraints.txt").write_text("\n".join(_constraint(d) for d in constraints) + "\n",
                                              encoding="utf-8")
        cmd = [sys.executable, "-m", "piptools", "compile", "--quiet", "--generate-hashes", "--allow-unsafe",
               "--no-header", "--no-config", "--strip-extras", "--no-emit-trusted-host", "--no-emit-find-links",
               "--index-url", index_url, "--constraint", "constraints.txt",
               "--pip-args", "--retries 1 --timeout 30",
               "--cache-dir", str(work / "cache"), "--output-file", "requirements.lock", "requirements.in"]
        if extra_index:
            cmd[cmd.index("--constraint"):cmd.index("--constraint")] = ["--extra-index-url", extra_index]
        try:
            proc = subprocess.run(cmd, cwd=work, env=_clean_pip_env(), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CompileError(f"pip-compile did not finish within {timeout:.0f}s") from None
        if proc.returncode != 0:
            err = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
            key = next((ln for ln in err if "ERROR" in ln or "Could not" in ln or "No matching" in ln),
                       err[-1] if err else f"exit {proc.returncode}")
            raise CompileError(f"pip-compile failed: {key.strip()[:300]}")
        return (work / "requirements.lock").read_text(encoding="utf-8")


# How long pip-compile (and, by default, the repro's run that finds its imports) may take.
LOCK_TIMEOUT = 600.0
# Pinning after reduce's search never outlasts --max-time by more than this: the probe, the
# repro's run and pip-compile get what is left of it plus the grace (bot/reduction.py).
PIN_GRACE = 60.0


def write_lock(repro_dir: ReproDir, python: str, imported_modules: list[str] | None = None, *,
               index_url: str | None = None, offline: bool | None = None, timeout: float = LOCK_TIMEOUT,
               run_timeout: float | None = None) -> LockResult:
    """Write requirements.in and requirements.lock for ``repro_dir``, from the interpreter ``python``.

    ``imported_modules``: the top-level modules the repro loaded; when None, the repro is run
    once under ``modules_launcher_source()`` to find them (for ``run_timeout`` seconds, default
    ``timeout``). ``index_url`` defaults to
    $REPROBOT_INDEX_URL or PyPI; ``offline`` (or $REPROBOT_OFFLINE=1) skips the index and
    writes the snapshot.
    """
    t0 = time.monotonic()
    if imported_modules is None:
        args: tuple[str, ...] = ()
        try:
            args = tuple(repro_dir.read_json(repro_dir.signature_json).get("args") or ())
        except ReprobotError:
            pass
        imported_modules = find_imported_modules(python, repro_dir.repro, args,
                                                 timeout=timeout if run_timeout is None else run_timeout)
    env = Environment.probe(python, imported_modules)
    roots = env.roots_for(imported_modules)
    closure, missing = env.closure(roots)
    extra_index = torch_index(closure)
    index_url = index_url or os.environ.get("REPROBOT_INDEX_URL") or DEFAULT_INDEX
    if offline is None:
        offline = os.environ.get("REPROBOT_OFFLINE", "") not in ("", "0")

    write_text_atomic(repro_dir.requirements_in,
                      scrub(render_requirements_in(roots, extra_index, env.python_version, len(imported_modules))).text)

    hashed = [d for d in closure if d.hashable]
    # What pip-compile must resolve: the importable roots, and the installed dependencies of
    # roots it cannot fetch (a VCS accelerate still needs its torch and numpy pinned).
    direct_keys = {r.key for r in roots if r.hashable}
    for r in roots:
        if not r.hashable:
            sub, _ = env.closure([r])
            direct_keys |= {d.key for d in sub if d.hashable and d.key != r.key}
    inputs = [d for d in hashed if d.key in direct_keys]
    target = f"Python {env.python_version}, {env.markers.get('sys_platform')} {env.markers.get('platform_machine')}"
    mismatch = ".".join(env.python_version.split(".")[:2]) != "%d.%d" % sys.version_info[:2]

    if offline:
        reason = "offline requested"
    elif not inputs:
        reason = "nothing to compile"
    else:
        # pip-compile reports an unreachable extra index as a resolution conflict; ask first.
        reason = index_reachable(index_url) or (index_reachable(extra_index) if extra_index else None)
    body = None
    if reason is None:
        try:
            body = compile_lock(inputs, closure, index_url, extra_index, timeout=timeout)
        except CompileError as e:
            reason = str(e)
    indexes = [index_url] + ([extra_index] if extra_index else [])
    if body is not None:
        head = ["# requirements.lock — written by reprobot for the environment the repro failed in",
                f"# ({target}). Compiled by pip-tools: pip-compile --generate-hashes --allow-unsafe",
                "# from requirements.in, every version constrained to the one installed there.",
                f"# Index: {' + '.join(indexes)}",
                "# Install: python -m pip install --require-hashes -r requirements.lock"]
        if mismatch:
            head.append(f"# Note: resolved on Python {sys.version_info[0]}.{sys.version_info[1]} for a target of "
                        f"Python {env.python_version}; environment markers were evaluated for the former.")
        # pip-compile leaves out an index URL that equals pip's default; stating it keeps the
        # installer's own pip configuration from redirecting the install.
        if not re.search(r"^(--index-url|-i) ", body, re.M):
            head.append(f"--index-url {index_url}")
        text = "\n".join(head) + "\n" + body.rstrip("\n")
        mode, why = "compiled", ""
    else:
        head = ["# requirements.lock — SNAPSHOT, NOT COMPILED: " + str(reason),
                f"# The exact versions installed in the failing environment ({target}): the dependency",
                "# closure of requirements.in. No hashes; install with: python -m pip install -r requirements.lock"]
        head.append(f"--index-url {index_url}")
        if extra_index:
            head.append(f"--extra-index-url {extra_index}")
        text = "\n".join(head + [d.pin() for d in closure])
        mode, why = "snapshot", str(reason)
    tail = _unhashable_block(closure) if mode == "compiled" else []
    if missing:
        tail += ["", "# Declared but not installed in the failing environment (left out):"]
        tail += [f"#   {m}" for m in missing]
    write_text_atomic(repro_dir.requirements_lock, scrub(text + "\n" + "\n".join(tail) + ("\n" if tail else "")).text)
    return LockResult(mode=mode, reason=why, roots=[d.name for d in roots], closure=[d.name for d in closure],
                      unhashable=[d.name for d in closure if not d.hashable], index_urls=indexes,
                      seconds=round(time.monotonic() - t0, 2))
