"""Warm starts: a zygote per slot in the user's interpreter, forking one child per candidate.

On a Hugging Face script most of a run is importing the stack (torch, transformers, peft...).
A zygote pays that once; each candidate is a fork of it, made to look like a cold run (see
zygote_server.py). It is an optimisation only: reduction.py checks the original's warm outcome
against its cold one before trusting it, and the final repro is always verified cold.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from reducer.errors import ExitCode, ReprobotError
from reducer.run.home import home_variables, make_home
from reducer.run.processes import kill_group

SERVER = Path(__file__).with_name("zygote_server.py")
READY_TIMEOUT = 900.0   # importing the stack on a cold disk can take minutes


class ZygoteError(Exception):
    """The zygote could not start or died; the caller falls back to cold runs."""


@dataclass(frozen=True)
class EnvSetting:
    """``os.environ[name] = value`` (``only_if_unset``: ``os.environ.setdefault(name, value)``)."""
    name: str
    value: str
    only_if_unset: bool = False


def _environ_names(node: ast.stmt, os_names: set[str], environ_names: set[str]) -> None:
    """Note what an import binds that reaches ``os.environ``."""
    if isinstance(node, ast.Import):
        os_names.update(a.asname or a.name for a in node.names if a.name == "os")
    elif isinstance(node, ast.ImportFrom) and node.module == "os" and node.level == 0:
        environ_names.update(a.asname or a.name for a in node.names if a.name == "environ")


def _is_environ(expr: ast.expr, os_names: set[str], environ_names: set[str]) -> bool:
    return ((isinstance(expr, ast.Attribute) and expr.attr == "environ" and isinstance(expr.value, ast.Name)
             and expr.value.id in os_names) or (isinstance(expr, ast.Name) and expr.id in environ_names))


def _text(expr: ast.expr | None) -> str | None:
    return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else None


def _env_settings(node: ast.stmt, os_names: set[str], environ_names: set[str]) -> list[EnvSetting] | None:
    """The settings of a statement that only sets environment variables to literals, else None:
    ``os.environ["K"] = "v"``, ``os.environ.setdefault("K", "v")``, ``os.environ.update({"K": "v"})``
    / ``update(K="v")``."""
    if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript)
            and _is_environ(node.targets[0].value, os_names, environ_names)):
        name, value = _text(node.targets[0].slice), _text(node.value)
        return None if name is None or value is None else [EnvSetting(name, value)]
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and _is_environ(node.value.func.value, os_names, environ_names)):
        return None
    call, method = node.value, node.value.func.attr
    if method == "setdefault" and len(call.args) == 2 and not call.keywords:
        name, value = _text(call.args[0]), _text(call.args[1])
        return None if name is None or value is None else [EnvSetting(name, value, only_if_unset=True)]
    if method == "update":
        pairs: list[tuple[str | None, str | None]] = []
        if len(call.args) == 1 and isinstance(call.args[0], ast.Dict):
            pairs += [(_text(k) if k is not None else None, _text(v)) for k, v in zip(call.args[0].keys,
                                                                                   call.args[0].values)]
        elif call.args:
            return None
        pairs += [(k.arg, _text(k.value)) for k in call.keywords]     # after the dict, as update does
        if pairs and all(k is not None and v is not None for k, v in pairs):
            return [EnvSetting(k, v) for k, v in pairs]      # type: ignore[arg-type]
    return None


def _leading_block(source: str) -> tuple[list[str], tuple[EnvSetting, ...], bool]:
    """(imports, environment settings, whether an import follows a setting) of the script's
    leading block: imports and statements that only set environment variables to literals."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [], (), False
    names: list[str] = []
    settings: list[EnvSetting] = []
    os_names: set[str] = set()
    environ_names: set[str] = set()
    after_setting = False
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module != "__future__":
                attrs = [a.name for a in node.names if a.name != "*"]
                names.append(node.module + (":" + ",".join(attrs) if attrs else ""))
        elif (found := _env_settings(node, os_names, environ_names)) is not None:
            settings += found
            continue
        else:
            break
        after_setting = after_setting or bool(settings)
        _environ_names(node, os_names, environ_names)
    return names, tuple(settings), after_setting


def leading_environment(source: str) -> tuple[EnvSetting, ...]:
    """The environment the script sets in its leading block, before the imports that follow
    (``os.environ.setdefault("HF_HUB_OFFLINE", "1")`` above ``import transformers``): a warm
    interpreter that imports those modules has to have it set first (ZygotePool.acquire). Empty
    when no import follows a setting."""
    _names, settings, after = _leading_block(source)
    return settings if after else ()


def packages(modules: list[str]) -> set[str]:
    """The top-level packages of warm_imports' entries (``transformers:AutoModel`` → transformers)."""
    return {m.split(":")[0].split(".")[0] for m in modules}


def with_settings(env: dict[str, str], settings: tuple[EnvSetting, ...]) -> dict[str, str]:
    out = dict(env)
    for s in settings:
        if s.only_if_unset:
            out.setdefault(s.name, s.value)
        else:
            out[s.name] = s.value
    return out


def warm_imports(source: str, script_dir: Path, through_environment: bool = False) -> list[str]:
    """Modules worth importing ahead: the script's leading block of top-level imports, each as
    ``module`` or, for ``from module import a, b``, ``module:a,b``. Resolving the names matters:
    ``from transformers import AutoModel`` loads the model's code lazily, on that attribute
    access, and it is most of the import time.

    Only the leading block: an import after other statements may depend on them (a sys.path
    change, a variable computed first), and importing it early would change what the script does.
    ``through_environment``: the block goes on past statements that only set environment variables
    to literals (``leading_environment``), for a warm interpreter started with them set. Modules
    that live next to the script are left out (they are copied per run), and so is anything that
    is not a plain import."""
    names, settings, _after = _leading_block(source)
    if not through_environment and settings:
        names, _, _ = _leading_block(_before_first_setting(source))
    out: list[str] = []
    for name in names:
        top = name.split(":")[0].split(".")[0]
        if (script_dir / f"{top}.py").exists() or (script_dir / top).is_dir():
            continue
        if name not in out:
            out.append(name)
    return out


def _before_first_setting(source: str) -> str:
    """The source up to its leading block's first environment setting."""
    tree = ast.parse(source)
    os_names: set[str] = set()
    environ_names: set[str] = set()
    for node in tree.body:
        if _env_settings(node, os_names, environ_names) is not None:
            return "\n".join(source.splitlines()[:node.lineno - 1]) + "\n"
        _environ_names(node, os_names, environ_names)
    return source


@dataclass
class ZygoteInfo:
    imported: list[str] = field(default_factory=list)
    failed: list[list[str]] = field(default_factory=list)
    threads: int = 1
    cuda_initialized: bool = False
    gpus: bool = False
    start_seconds: float = 0.0
    dropped: list[str] = field(default_factory=list)   # left out because importing them initialised CUDA
    first_cuda_init: list[str] = field(default_factory=list)  # the stack that initialised it

    def to_dict(self) -> dict:
        return {"imported": self.imported, "failed": self.failed, "threads": self.threads,
                "cuda_initialized": self.cuda_initialized, "gpus": self.gpus,
                "start_seconds": round(self.start_seconds, 2), "dropped": self.dropped,
                "first_cuda_init": self.first_cuda_init}


class Zygote:
    """One warm interpreter. Runs one candidate at a time (a slot owns it)."""

    def __init__(self, python: str, modules: list[str], env: dict[str, str],
                 settings: tuple[EnvSetting, ...] = ()) -> None:
        self.python = python
        self.modules = list(modules)
        # the script's leading environment settings, in force while it imports (leading_environment)
        self.settings = settings
        self.env = with_settings(env, settings)
        # the packages it was asked to import (those it could not import included): a candidate
        # whose imports reach no other package can run on it (ZygotePool.acquire)
        self.packages = packages(modules)
        self.info = ZygoteInfo()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._home: Path | None = None
        self._lock = threading.Lock()
        self.first_cuda_init: list[str] = []
        # the candidates' spawn / forkserver children: how many started warm, cold, and why cold
        self.children: dict = {"warm": 0, "cold": 0, "why_cold": []}

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> ZygoteInfo:
        """Start it, dropping from the import list any module whose import initialises CUDA."""
        t0 = time.monotonic()
        modules = list(self.modules)
        dropped: list[str] = []
        while True:
            reply = self._spawn(modules)
            if reply.get("ready"):
                break
            culprit = reply.get("cuda_initialized_by")
            self._close()
            if not culprit or culprit not in modules:
                raise ZygoteError(reply.get("why") or "the warm interpreter did not start")
            # Leave out the module whose import initialised CUDA (the child imports it itself);
            # the others still go ahead (a module the culprit would have imported first is
            # imported either way).
            dropped.append(culprit)
            self.first_cuda_init = reply.get("first_cuda_init") or []
            modules = [m for m in modules if m != culprit]
        self.info = ZygoteInfo(reply.get("imported", []), reply.get("failed", []), reply.get("threads", 1),
                               bool(reply.get("cuda_initialized")), bool(reply.get("gpus")),
                               time.monotonic() - t0, dropped, self.first_cuda_init)
        return self.info

    def _spawn(self, modules: list[str]) -> dict:
        self._home = Path(tempfile.mkdtemp(prefix="reprobot-zygote-"))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(self.env)
        env["TMPDIR"] = env["TEMP"] = env["TMP"] = str(self._home)
        # A home of its own, never the user's: what the imports write under ~ lands here (each
        # candidate then gets its run's home: reducer/run/home.py).
        env.update(home_variables(make_home(self._home)))
        # is_available()/device_count() through NVML during the imports: cudaGetDeviceCount
        # would initialise the driver, and no forked child could use the GPU after that.
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
        log = open(self._home / "zygote.log", "wb")
        try:
            self._proc = subprocess.Popen(
                [self.python, str(SERVER), str(theirs.fileno()), *modules], pass_fds=[theirs.fileno()],
                cwd=self._home, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        except OSError as e:
            raise ZygoteError(f"could not start the warm interpreter: {e}") from None
        finally:
            theirs.close()
            log.close()
        self._sock = ours
        ours.settimeout(READY_TIMEOUT)
        try:
            data = ours.recv(1 << 20)
        except (socket.timeout, OSError):
            data = b""
        ours.settimeout(None)
        if not data:
            tail = self.log_tail()
            self._close()
            raise ZygoteError("the warm interpreter exited while importing" + (f": {tail}" if tail else ""))
        return json.loads(data.decode())

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = (self._home / "zygote.log").read_text(errors="replace") if self._home else ""
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])[:300]

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None
        if self._proc is not None:
            kill_group(self._proc.pid)
            self._proc.wait()
            self._proc = None
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def stop(self) -> None:
        with self._lock:
            self._close()

    def count_children(self, stats: dict) -> None:
        self.children["warm"] += int(stats.get("warm", 0) or 0)
        self.children["cold"] += int(stats.get("cold", 0) or 0)
        for why in stats.get("why_cold") or []:
            if why not in self.children["why_cold"] and len(self.children["why_cold"]) < 5:
                self.children["why_cold"].append(why)

    # ---- one candidate ----------------------------------------------------------------------
    def fork(self, script: str, args: list[str], cwd: Path, env: dict[str, str],
             stdout_fd: int, stderr_fd: int, limits: dict[str, int] | None = None,
             cgroup: str | None = None) -> "WarmChild":
        """``cgroup``: the cgroup.procs file of the run's pids cgroup, which the child enters."""
        if self._sock is None or not self.alive:
            raise ZygoteError("the warm interpreter is not running")
        req = {"script": script, "args": list(args), "cwd": str(cwd), "env": env, "limits": limits or {},
               "cgroup": cgroup}
        try:
            socket.send_fds(self._sock, [json.dumps(req).encode()], [stdout_fd, stderr_fd])
            data = self._sock.recv(1 << 16)
        except OSError as e:
            raise ZygoteError(f"the warm interpreter stopped answering: {e}") from None
        if not data:
            raise ZygoteError("the warm interpreter exited")
        return WarmChild(self, json.loads(data.decode())["pid"])


class WarmChild:
    """A candidate forked by a zygote; its exit status arrives on the zygote's socket."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.returncode: int | None = None
        self.children: dict = {}

    def wait(self, timeout: float) -> bool:
        """True once the child has exited (its status read); False after ``timeout``."""
        if self.returncode is not None:
            return True
        sock = self.zygote._sock
        if sock is None:
            self.returncode = -9
            return True
        sock.settimeout(timeout)
        try:
            data = sock.recv(1 << 16)
        except socket.timeout:
            return False
        except OSError:
            data = b""
        finally:
            try:
                sock.settimeout(None)
            except OSError:
                pass
        if not data:
            raise ZygoteError("the warm interpreter died during a run")
        reply = json.loads(data.decode())
        self.returncode = int(reply["returncode"])
        self.children = reply.get("children") or {}
        self.zygote.count_children(self.children)
        return True


class ZygotePool:
    """Zygotes handed to runs one at a time; started lazily, up to one per parallel slot."""

    def __init__(self, python: str, modules: list[str], env: dict[str, str]) -> None:
        self.python, self.modules, self.env = python, modules, env
        self._idle: list[Zygote] = []
        self._all: list[Zygote] = []
        self._lock = threading.Lock()
        self.info: ZygoteInfo | None = None
        self._modules_for: dict[tuple[EnvSetting, ...], list[str]] = {}
        self._busy = self._peak = 0
        self.failures = 0
        self._stopped: list[Zygote] = []

    def start_one(self, settings: tuple[EnvSetting, ...] = (), modules: list[str] | None = None) -> Zygote:
        if modules is None:
            modules = self._modules_for.get(settings, self.modules)
        else:
            # what an earlier zygote of these settings found importable, plus the new packages
            known = self._modules_for.get(settings, self.modules if not settings else [])
            modules = known + [m for m in modules if m not in known]
        z = Zygote(self.python, modules, self.env, settings)
        info = z.start()
        with self._lock:
            self._all.append(z)
            # the report names the zygote that imports the most (a script that sets the
            # environment before its stack imports gets one more zygote that imports them)
            if self.info is None or len(info.imported) > len(self.info.imported):
                self.info = info
            if info.dropped and not self.info.dropped:
                self.info = info
            # later zygotes need not probe the imports that initialise CUDA again
            self._modules_for[settings] = info.imported
            if not settings:
                self.modules = info.imported
        return z

    def acquire(self, settings: tuple[EnvSetting, ...] = (), modules: list[str] | None = None) -> Zygote:
        """An idle zygote whose imports ran with the candidate's leading environment ``settings``
        and reached every package of the candidate's leading ``modules`` (None: any idle one of
        those settings), else a new one importing them. A candidate without the script's
        environment line, or the boundary call's candidate importing what the original imported
        later, would otherwise import the stack in its own run, past the warm run's time bound.

        Idle zygotes of other settings or imports stay while there are fewer than two per slot
        in use at the peak (the search interleaves candidates with and without a line), and the
        oldest go first past that."""
        need = packages(modules or [])
        stale: list[Zygote] = []
        with self._lock:
            self._busy += 1
            self._peak = max(self._peak, self._busy)
            for z in list(self._idle):
                if not z.alive:
                    self._idle.remove(z)
                elif z.settings == settings and need <= z.packages:
                    self._idle.remove(z)
                    return z
            alive = [z for z in self._all if z.alive]
            while len(alive) >= 2 * self._peak and self._idle:
                z = self._idle.pop(0)
                stale.append(z)
                alive.remove(z)
            self._all = [z for z in self._all if z not in stale]
            self._stopped += stale
        for z in stale:
            z.stop()
        try:
            return self.start_one(settings, modules)
        except BaseException:
            with self._lock:
                self._busy -= 1
            raise

    def release(self, z: Zygote, healthy: bool = True) -> None:
        with self._lock:
            self._busy = max(0, self._busy - 1)
            if healthy and z.alive:
                self._idle.append(z)
                return
        self.failures += 1
        z.stop()

    def children(self) -> dict:
        """Spawn / forkserver children of warm runs so far: {"warm": n, "cold": n, "why_cold": [...]}."""
        out: dict = {"warm": 0, "cold": 0, "why_cold": []}
        with self._lock:
            zygotes = list(self._all) + list(self._stopped)
        for z in zygotes:
            out["warm"] += z.children["warm"]
            out["cold"] += z.children["cold"]
            out["why_cold"] += [w for w in z.children["why_cold"] if w not in out["why_cold"]]
        return out

    def stop(self) -> None:
        with self._lock:
            self._stopped += self._all
            zygotes, self._all, self._idle = self._all, [], []
        for z in zygotes:
            z.stop()


def check_server_python(python: str) -> None:
    """The server needs socket.send_fds (Python 3.9+); say so in one line otherwise."""
    proc = subprocess.run([python, "-c", "import socket,sys; sys.exit(0 if hasattr(socket, 'send_fds') else 3)"],
                          capture_output=True)
    if proc.returncode != 0:
        raise ReprobotError("warm starts need Python 3.9+ in the script's interpreter; use --cold",
                            ExitCode.NO_INTERPRETER)

