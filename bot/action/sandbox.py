"""Where the Action's posted code runs: a sandbox laid out by bot/action/jail.py (issues #18, #28).

The reproduce job runs a script anyone could have posted, and reprobot's own steps after it
(route, dedup, draft) read what that script left behind. So *every* step that touches the
posted code or its outputs runs inside one sandbox, and the job itself only reads back regular
files that the sandbox's first process copied out after it had killed everything else.

Inside (``isolate``): Linux namespaces made with util-linux's ``unshare`` (no root needed where
unprivileged user namespaces are allowed) — a PID namespace with its own ``/proc``, a network
namespace with no interface up, a mount namespace whose root is an allow-list: the system
folders, the interpreters and reprobot's snapshot read-only, a size-capped scratch tmpfs, plain
device nodes. The runner's home, ``RUNNER_TEMP`` (its command files), the workspace, the runner's
own folder (``_diag``, ``.credentials``), the artifact folder and every host UNIX socket are not
in it. Steps run with no capabilities, no new privileges and process-count, file-size and disk
limits.

``probe()`` checks that all of this works here; the Action refuses untrusted code when it does
not (unless a maintainer opts out with ``--isolation none`` on a runner that is a sandbox).
ubuntu-24.04 runners restrict unprivileged user namespaces through AppArmor: the workflow
loads a profile for ``/usr/bin/unshare`` with ``userns`` before this step (docs/ACTION.md).
"""
from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

MODES = ("namespaces", "none")
# Read-only in the sandbox: what a Python program, its native libraries and CUDA need.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys", "/nix")
# Folders of the runner that must not be seen even where a read-only system folder holds them.
RUNNER_VARS = ("RUNNER_TEMP", "GITHUB_WORKSPACE", "RUNNER_WORKSPACE", "HOME")
RUNNER_MARKS = (".runner", ".credentials", "_diag")
INSIDE_REPROBOT = "/reprobot"
INSIDE_SCRATCH = "/scratch"
JAIL_FAILED = 121


@dataclass(frozen=True)
class Limits:
    procs: int = 1024                       # processes and threads, on top of what the user runs now
    file_size: int = 1 << 30                # largest file a step may write
    disk: int = 4 << 30                     # the scratch tmpfs: the script's copies, /tmp, home
    shm: int = 1 << 30                      # /dev/shm (DataLoader workers share tensors there)


@dataclass(frozen=True)
class Isolation:
    """How the Action's steps are isolated: "namespaces" or "none" (a runner that is a sandbox)."""

    mode: str
    reason: str = ""          # why namespaces are not available, when they are not


@dataclass
class Step:
    name: str
    argv: list[str]
    wall: float
    network: bool = False
    needs_repro: bool = False
    after: dict | None = None               # {"step": name, "exit": [codes]}: run only then


@dataclass
class Layout:
    """The paths of one sandboxed job, as the job sees them and as the steps see them."""

    work: Path                              # host folder: snapshot, plan, export; never visible inside
    isolate: bool
    python: str                             # the posted code's interpreter
    read_only: tuple[str, ...] = ()         # extra host paths a maintainer shares (a model cache)
    hide: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)

    @property
    def reprobot(self) -> str:
        return INSIDE_REPROBOT if self.isolate else str(self.work / "reprobot")

    @property
    def scratch(self) -> str:
        return INSIDE_SCRATCH if self.isolate else str(self.work / "scratch")

    @property
    def export(self) -> Path:
        return self.work / "export"

    def reprobot_cmd(self, *args: str) -> list[str]:
        """reprobot from its read-only snapshot, in isolated mode: no PYTHON* variable, no user site,
        and the snapshot ahead of any installed copy."""
        boot = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from bot.cli import main; "
                "raise SystemExit(main(sys.argv[1:]))")
        return [sys.executable, "-I", "-c", boot, self.reprobot, *args]


def interpreter_roots(python: str) -> list[str]:
    """The folders an interpreter needs, found without running it (running it would execute its
    ``site`` before any sandbox): its prefix, a venv's base from ``pyvenv.cfg``, and the prefix of
    the file its link points at."""
    exe = Path(os.path.abspath(python))
    roots = {exe.parent.parent, Path(os.path.realpath(exe)).parent.parent}
    cfg = exe.parent.parent / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                roots.add(Path(os.path.realpath(value.strip())).parent)
    return sorted(str(r) for r in roots if str(r) != "/")


def _own_roots() -> list[str]:
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return sorted({os.path.realpath(p) for p in prefixes} | set(interpreter_roots(sys.executable)))


def runner_folders(environ: dict[str, str]) -> list[str]:
    """The runner's folders: its temp (command files), workspaces, home, and its own root (the
    first folder above them holding ``.runner``, ``.credentials`` or ``_diag``)."""
    found: set[str] = set()
    for name in RUNNER_VARS:
        value = environ.get(name)
        if not value or not os.path.isabs(value):
            continue
        found.add(os.path.realpath(value))
        for parent in Path(os.path.realpath(value)).parents:
            if any((parent / mark).exists() for mark in RUNNER_MARKS):
                found.add(str(parent))
                break
    found.add(os.path.realpath(Path.home()))
    return sorted(p for p in found if p != "/")


def snapshot(work: Path) -> Path:
    """A read-only copy of reprobot for the steps inside: nothing the posted code does can change
    the code that reads its results, here or in a later job on the same runner."""
    import bot
    import reducer
    from bot.issue.templating import templates_dir

    dest = work / "reprobot"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in (bot, reducer):
        src = Path(pkg.__file__).resolve().parent
        shutil.copytree(src, dest / src.name, ignore=skip)
    templates = templates_dir()
    if templates.resolve().parent != Path(bot.__file__).resolve().parent:
        shutil.copytree(templates, dest / "templates", ignore=skip)
    # Compiled now, by reprobot: read-only inside, so the steps could not write their own caches.
    compileall.compile_dir(str(dest), quiet=2, workers=1)
    for path in sorted(dest.rglob("*"), reverse=True):
        path.chmod(0o555 if path.is_dir() else 0o444)
    dest.chmod(0o555)
    return dest


def plan(layout: Layout, steps: list[Step], env: dict[str, str], script_name: str, *,
         export_names: str, max_file: int, max_total: int) -> dict:
    """What jail.py reads: the view to build, the steps, the limits, what to hand out."""
    scratch = layout.scratch
    read_only: list[tuple[str, str]] = []
    if layout.isolate:
        binds = {*SYSTEM, *_own_roots(), *interpreter_roots(layout.python), *layout.read_only}
        read_only = [(p, p) for p in sorted(binds)] + [(str(layout.work / "reprobot"), INSIDE_REPROBOT)]
    return {
        "isolate": layout.isolate,
        "new_root": str(layout.work / "root"),
        "read_only": read_only,
        "hide": sorted({*layout.hide, str(layout.work)}),
        "scratch": scratch,
        "store": f"{scratch}/repros",
        "script": f"{scratch}/input/{script_name}",
        "script_source": str(layout.work / "input" / script_name),
        "export": str(layout.export),
        "env": env,
        "network_first": bool(steps) and steps[0].network,
        "steps": [vars(s) for s in steps],
        "limits": {"nproc": _nproc(layout.limits.procs), "fsize": layout.limits.file_size,
                   "disk": layout.limits.disk, "shm": layout.limits.shm},
        "export_names": export_names, "max_file": max_file, "max_total": max_total,
    }


# Processes and threads of reprobot's own in the sandbox (the jail, reduce and its output
# threads, the warm interpreter), on top of the posted code's budget.
RESERVED_TASKS = 256


def process_cgroup(limits: Limits):
    """The sandbox's pids cgroup, where one can be made here (cgroup v1's pids hierarchy, or a
    delegated v2 subtree): every task in the sandbox, whoever runs it, at most ``limits.procs``
    plus reprobot's own. The kernel applies it to root too, which RLIMIT_NPROC does not. None
    where none can be made: the jail's RLIMIT_NPROC (not applied to root) and each run's own
    count (reduce --max-processes) are the bounds then."""
    from reducer.run.guard import PidsCgroup
    return PidsCgroup.make(limits.procs + RESERVED_TASKS)


def limits_hit(status: dict | None, cgroup, limits: Limits) -> list[str]:
    """The sandbox-wide limits that were reached, one line each: its process cap (the cgroup
    refused a fork) and its scratch (full, as the jail saw it during a step)."""
    out = []
    if cgroup is not None and cgroup.refused():
        out.append(f"the sandbox hit its process limit ({limits.procs + RESERVED_TASKS} processes and threads, "
                   "--max-procs)")
    if status is not None and any("disk" in s.get("limits", []) for s in status["steps"]):
        out.append(f"the sandbox's scratch filled up ({limits.disk >> 20} MiB, --max-disk-mb)")
    return out


def _nproc(budget: int) -> int:
    """RLIMIT_NPROC counts every process and thread of the user (on older kernels across the
    machine), so the limit is what the user runs now plus the budget."""
    from reducer.run.limits import user_tasks
    return user_tasks() + budget


def stage_workdir(work: Path, script_name: str, script: str, *, isolate: bool) -> None:
    """The run's folders (export/, input/ with the posted script, root/) laid out in ``work``."""
    for sub in ("export", "input", "root"):
        (work / sub).mkdir()
    (work / "input" / script_name).write_text(script, encoding="utf-8")
    if not isolate:
        for sub in ("tmp", "home", "input"):
            (work / "scratch" / sub).mkdir(parents=True)


def command(layout: Layout, plan_path: Path) -> list[str]:
    """The jail as the first process: standard library only (``-I -S``), from the snapshot."""
    jail = [sys.executable, "-I", "-S", str(layout.work / "reprobot" / "bot" / "action" / "jail.py"), str(plan_path)]
    if not layout.isolate:
        return jail
    return ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc",
            "--", *jail]


def probe() -> Isolation:
    """Namespaces if a trial sandbox works here (read-only root, no network, own /proc, a
    writable scratch), else "none" with the reason."""
    missing = [tool for tool in ("unshare", "setpriv") if shutil.which(tool) is None]
    if missing:
        return Isolation("none", reason=f"{', '.join(missing)} not found (util-linux)")
    check = ("import os, socket\n"
             "assert [n for _, n in socket.if_nameindex()] == ['lo'], 'network'\n"
             "assert len([p for p in os.listdir('/proc') if p.isdigit()]) < 8, 'proc'\n"
             "open('/scratch/ok', 'w').write('ok')\n"
             "try:\n    open('/usr/reprobot-probe', 'w')\nexcept OSError:\n    pass\n"
             "else:\n    raise SystemExit('writable root')\n")
    with tempfile.TemporaryDirectory(prefix="reprobot-probe-") as tmp:
        work = Path(tmp)
        layout = Layout(work=work, isolate=True, python=sys.executable)
        stage_workdir(work, "probe.py", "", isolate=True)
        (work / "reprobot" / "bot" / "action").mkdir(parents=True)
        shutil.copy(Path(__file__).with_name("jail.py"), work / "reprobot" / "bot" / "action" / "jail.py")
        steps = [Step("probe", [sys.executable, "-I", "-S", "-c", check], wall=30)]
        p = plan(layout, steps, {"PATH": os.environ.get("PATH", os.defpath)}, "probe.py",
                 export_names=r"^$", max_file=0, max_total=0)
        (work / "plan.json").write_text(json.dumps(p), encoding="utf-8")
        try:
            proc = subprocess.run(command(layout, work / "plan.json"), stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return Isolation("none", reason=f"unshare could not run ({e})")
        status = read_status(layout.export)
        if proc.returncode != 0 or status is None:
            last = (status or {}).get("error") or (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            return Isolation("none", reason=f"user namespaces are not available here ({str(last)[:200]})")
        ran = status["steps"]
        if not ran or ran[0]["exit"] != 0:
            tail = (ran[0]["stderr_tail"].strip().splitlines() or ["?"])[-1] if ran else "the check did not run"
            return Isolation("none", reason=f"the sandbox does not hold here ({tail[:200]})")
    return Isolation("namespaces")


MAX_STATUS = 256 * 1024


def read_status(export: Path) -> dict | None:
    """status.json from the export folder, as untrusted data: a plain file, bounded, well-typed."""
    from bot.action.jail import read_plain

    try:
        fd = os.open(export, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        raw = read_plain(fd, "status.json", MAX_STATUS)
    finally:
        os.close(fd)
    try:
        status = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(status, dict) or not isinstance(status.get("steps"), list):
        return None
    steps = [s for s in status["steps"] if isinstance(s, dict) and isinstance(s.get("name"), str)
             and (s.get("exit") is None or isinstance(s.get("exit"), int)) and isinstance(s.get("stderr_tail", ""), str)]
    for s in steps:
        found = s.get("limits")
        s["limits"] = [x for x in found if x in ("disk",)] if isinstance(found, list) else []
    return {"steps": steps, "error": str(status.get("error") or "")[:500],
            "repro": status.get("repro") if isinstance(status.get("repro"), str) else None}
