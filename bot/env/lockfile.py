"""requirements.in and requirements.lock for a repro: the environment it failed in, pinned.

- requirements.in: the distributions the repro actually imported (the modules loaded in its
  run, mapped to distributions in the user's interpreter), pinned to the installed versions.
- A distribution installed from a source the reporter controls (PEP 610 direct_url.json: a VCS
  reference, an archive URL, a local folder or file) is never written as an installable line —
  a maintainer told to install ``peft @ https://wheels.<their-host>/…whl`` runs the reporter's
  code. It is named ``# name==version  (installed from a private source: …)``, without its URL
  or path. An index other than PyPI's or PyPI's mirror of PyTorch is not named either.
- requirements.lock: compiled with pip-tools (``pip-compile --generate-hashes``) from the
  importable part, every version constrained to the one installed, when the index is
  reachable; otherwise a snapshot of the installed dependency closure with a header saying so.
  Private-source distributions are listed below the hashed part, as comments (a release of one
  that an index package depends on is pinned in the hashed part from the index).
- torch's local build tag (``+cu129``, ``+cpu``, ``+rocm6.2``) names the index it came from;
  that index is recorded (``--extra-index-url``).
- Ambient pip configuration (pip.conf, PIP_INDEX_URL, find-links, constraints) never leaks:
  pip-compile runs with ``PIP_CONFIG_FILE=os.devnull``, no PIP_* resolution variables, no
  pip-tools config, in an empty folder.

How the imported modules are found: the repro runs once through its folder's run recipe
(bot/run_recipe.py: its launch line, arguments and environment, as every step runs it) with
``$REPROBOT_MODULES_OUT`` set, and every interpreter of that run writes the top-level names of
``sys.modules`` at exit (reducer/run/exception_hook/sitecustomize.py); the union is the roots' source.
"""
from __future__ import annotations

import json
import os
import re
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

from bot.env.probe import run_probe
from bot.scrub import scrub
from bot.store import ReproDir, write_text_atomic
from bot.targets.sysinfo import local_name, release_copy
from reducer.errors import ExitCode, ReprobotError
from reducer.run.processes import resolve_python

DEFAULT_INDEX = "https://pypi.org/simple"
TORCH_INDEX = "https://download.pytorch.org/whl/"
PRIVATE_SOURCE = "installed from a private source: not installable from here"
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
        """A local copy of one of the index's own release files: ``name==version`` re-creates it."""
        return self.kind == "archive" and release_copy(self.name, self.version, self.url)

    @property
    def private_source(self) -> bool:
        """Installed from somewhere the reporter chose (a VCS URL, an archive URL, a local folder or
        file): nothing to tell a maintainer to install from."""
        return self.kind in ("vcs", "editable", "local-dir") or (self.kind == "archive" and not self.release_copy)

    @property
    def hashable(self) -> bool:
        """Can pip-compile fetch this exact version from an index and hash it?"""
        if self.kind in HASHABLE_KINDS or self.release_copy:
            return True
        # Installed by conda & co: worth a try on the index at the same version.
        return self.kind not in ("vcs", "editable", "local-dir", "archive")

    def pin(self) -> str:
        """The requirement line that re-creates this install from an index, or, for a private
        source, a comment naming it (name and version; never the URL or path)."""
        if self.private_source:
            return f"# {self.name}=={self.version}  ({PRIVATE_SOURCE})"
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

def find_imported_modules(python: str, script: Path, args: tuple[str, ...] = (), timeout: float = 600.0) -> list[str]:
    """Run ``script`` once (in a scratch copy of its folder, as the reducer runs it); the modules
    it loaded. The script is expected to fail: its exit status does not matter, only what it imported."""
    if not script.is_file():
        raise ReprobotError(f"{script}: no such script", ExitCode.FILE_MISSING)
    from reducer.run.runner import Runner, RunSpec
    runner = Runner(RunSpec(script=script, python=resolve_python(python), args=tuple(args), timeout=timeout))
    return modules_of_run(runner, script.read_text(encoding="utf-8"), script.name)


def repro_modules(repro_dir: ReproDir, python: str, timeout: float) -> list[str]:
    """The repro's modules, from one run through the folder's run recipe (its launch line and
    arguments, as every step runs it: bot/run_recipe.py); every process of the run counts."""
    from bot.run_recipe import RunRecipe
    if not repro_dir.signature_json.is_file():
        return find_imported_modules(python, repro_dir.repro, timeout=timeout)
    recipe = RunRecipe.load(repro_dir.signature_json)
    try:
        # a link is no repro (a run of the posted code may have left one in its place)
        if repro_dir.repro.is_symlink():
            raise OSError("a link")
        source = repro_dir.repro.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReprobotError(f"{repro_dir.repro.name}: cannot read it ({getattr(e, 'strerror', None) or e})",
                            ExitCode.FILE_MISSING) from None
    with tempfile.TemporaryDirectory(prefix="reprobot-modules-") as home:
        runner = recipe.runner(Path(home), source, resolve_python(python), timeout)
        return modules_of_run(runner, source, recipe.script)


def modules_of_run(runner, source: str, name: str) -> list[str]:
    """One cold run of ``source`` with $REPROBOT_MODULES_OUT set: every interpreter of it writes
    the top-level modules it loaded at exit (reducer/run/exception_hook/sitecustomize.py)."""
    with tempfile.TemporaryDirectory(prefix="reprobot-modules-") as tmp:
        out = Path(tmp) / "modules.jsonl"
        outcome = runner.run(source, warm=False, extra_env={MODULES_ENV: str(out)})
        names: set[str] = set()
        try:
            for line in out.read_text(encoding="utf-8").splitlines():
                names.update(str(n) for n in json.loads(line).get("modules") or ())
        except (OSError, ValueError, AttributeError):
            names = set()
    if not names:
        why = "timed out" if outcome.timed_out else "was killed" if outcome.signal else "wrote nothing"
        raise ReprobotError(f"{name}: could not record the modules it imports (the run {why}); "
                            "pass them explicitly", ExitCode.BAD_INPUT)
    return sorted(names)


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
    lines = ["", "# ---- Not hash-pinnable: installed from a private source (a URL, a VCS checkout, a local",
             "# folder or file), so not installable from here. Their dependencies are pinned above; where a",
             "# package above needs one of them, a release of it from the index is pinned above instead:"]
    return lines + [d.pin() for d in direct]


_INDEX_LINE = re.compile(r"^\s*(?:--(?:extra-)?index-url|-i|--find-links|-f)[\s=]+(\S+)")


def public_index(url: str) -> bool:
    """PyPI's own index, or PyTorch's: the only indexes a lock may tell a maintainer to use."""
    u = url.rstrip("/")
    return u in (DEFAULT_INDEX, "https://pypi.python.org/simple") or u.startswith(TORCH_INDEX)


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
    once through its run recipe to find them (for ``run_timeout`` seconds, default
    ``timeout``). ``index_url`` defaults to
    $REPROBOT_INDEX_URL or PyPI; ``offline`` (or $REPROBOT_OFFLINE=1) skips the index and
    writes the snapshot.
    """
    t0 = time.monotonic()
    if imported_modules is None:
        imported_modules = repro_modules(repro_dir, python, timeout if run_timeout is None else run_timeout)
    env = Environment.probe(python, imported_modules)
    roots = env.roots_for(imported_modules)
    closure, missing = env.closure(roots)
    extra_index = torch_index(closure)
    index_url = index_url or os.environ.get("REPROBOT_INDEX_URL") or DEFAULT_INDEX
    # What the lock tells a maintainer to install from: never an index the reporter chose.
    shown_index = index_url if public_index(index_url) else DEFAULT_INDEX
    if offline is None:
        offline = os.environ.get("REPROBOT_OFFLINE", "") not in ("", "0")

    from bot.env.notebook_installs import requirements_in_comments
    # A notebook's own installs follow as comments: requirements.in stays what ran (see there why).
    from bot.env.probe import recorded_names
    notebook = "\n".join(requirements_in_comments(repro_dir.path, env.dists, recorded_names()))
    write_text_atomic(repro_dir.requirements_in,
                      scrub(render_requirements_in(roots, extra_index, env.python_version, len(imported_modules))
                            + (notebook + "\n" if notebook else "")).text)

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
    # The terminal may name the reporter's own index; the file never does.
    written_reason = str(reason).replace(index_url, "a private index") if not public_index(index_url) else str(reason)
    if body is not None:
        # pip-compile names the indexes it used: only public ones stay (the header names PyPI's).
        body = "\n".join(ln for ln in body.splitlines()
                         if not (m := _INDEX_LINE.match(ln)) or public_index(m.group(1)))
    named = [shown_index if public_index(index_url) else "a private index (not named), installed from PyPI"] + \
        ([extra_index] if extra_index else [])
    if body is not None:
        head = ["# requirements.lock — written by reprobot for the environment the repro failed in",
                f"# ({target}). Compiled by pip-tools: pip-compile --generate-hashes --allow-unsafe",
                "# from requirements.in, every version constrained to the one installed there.",
                f"# Index: {' + '.join(named)}",
                "# Install: python -m pip install --require-hashes -r requirements.lock"]
        if mismatch:
            head.append(f"# Note: resolved on Python {sys.version_info[0]}.{sys.version_info[1]} for a target of "
                        f"Python {env.python_version}; environment markers were evaluated for the former.")
        # pip-compile leaves out an index URL that equals pip's default; stating it keeps the
        # installer's own pip configuration from redirecting the install.
        if not re.search(r"^(--index-url|-i) ", body, re.M):
            head.append(f"--index-url {shown_index}")
        text = "\n".join(head) + "\n" + body.rstrip("\n")
        mode, why = "compiled", ""
    else:
        head = ["# requirements.lock — SNAPSHOT, NOT COMPILED: " + written_reason,
                f"# The exact versions installed in the failing environment ({target}): the dependency",
                "# closure of requirements.in. No hashes; install with: python -m pip install -r requirements.lock"]
        head.append(f"--index-url {shown_index}")
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
