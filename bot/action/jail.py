"""The first process of the Action's sandbox: builds the posted code's view of the machine, runs
the plan's steps in it, then hands their results out (issue #28).

Run as ``python -I -S jail.py PLAN`` — as a script, standard library only, no ``site`` — so that
nothing the posted code could ever write (a ``.pth``, a module of reprobot's) is imported here.
Under ``unshare --user --map-root-user --pid --fork --mount`` it is PID 1 of its own PID
namespace and holds capabilities in its own user namespace only. It then:

1. builds a new root from an allow-list: the system folders and the interpreters' prefixes
   read-only (recursively), reprobot's snapshot read-only at ``/reprobot``, a size-capped tmpfs at
   ``/scratch`` (home, ``/tmp``, the script, the repro store), a ``/dev`` of plain device nodes and
   GPU nodes only, a fresh ``/proc``; homes, ``/run``, ``/var``, the host's ``/tmp`` and every
   runner folder (``RUNNER_TEMP``, the workspace, the runner's own folder with ``_diag`` and
   ``.credentials``) are not in it, and so no host UNIX socket is either;
2. pivots into it and detaches the old root;
3. runs each step with every capability dropped (``setpriv``), no new privileges, process-count,
   file-size and core limits, its own wall time, the scratch measured as it runs (full: said in
   ``status.json``); the network goes away before the first step that must not have it;
4. kills every process left in the namespace (``setsid`` daemons included) and only then copies
   the allow-listed regular files of the repro folder out, through a directory descriptor opened
   before the pivot: the export folder is never visible inside.

With ``isolate`` false (``--isolation none``, a runner that is itself a sandbox) it does 3 and 4
with process groups instead of a namespace, and stops a step whose scratch folder outgrows the
disk limit (there is no tmpfs to cap it).
"""
from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import resource
import signal
import socket
import stat
import subprocess
import sys
import time

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
CLONE_NEWNET = 0x40000000
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
SYS_MOUNT_SETATTR = 442                      # the same number on every architecture
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine())
# Device nodes a Python program (and CUDA) needs; everything else in the host's /dev stays out.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
GPU_DEVICES = re.compile(r"^(nvidia.*|dri|kfd)$")
EXIT_JAIL = 121                              # the sandbox could not be built: nothing ran

_libc = ctypes.CDLL(None, use_errno=True)


class JailError(Exception):
    pass


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise JailError(f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source or fstype} on {target}")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def read_only(target: str) -> None:
    """Make ``target`` and every mount below it read-only and nosuid.

    ``mount_setattr`` (Linux 5.12) does it recursively in one call; on older kernels each mount
    under ``target`` is remounted on its own."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    if _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, target.encode(), AT_RECURSIVE, ctypes.byref(attr),
                     ctypes.sizeof(attr)) == 0:
        return
    for point in _mounts_under(target):
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
        _check(_libc.mount(None, point.encode(), None, ctypes.c_ulong(flags), None), f"read-only {point}")


def _mounts_under(target: str) -> list[str]:
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == target or point.startswith(target.rstrip("/") + "/"):
                points.append(point)
    return sorted(points, key=len)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _prepare_target(target: str, source: str) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "a").close()


def _bind(source: str, target: str) -> None:
    _prepare_target(target, source)
    mount(source, target, None, MS_BIND | MS_REC)


def _hide(target: str) -> None:
    """Cover what a read-only folder would otherwise show (a runner folder under /opt)."""
    if os.path.isdir(target) and not os.path.islink(target):
        mount("reprobot-hidden", target, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=700")
    elif os.path.lexists(target):
        mount("/dev/null", target, None, MS_BIND)


def _layout(new: str, plan: dict) -> None:
    """Binds and hides in path order, so a folder kept inside a hidden one is bound after it."""
    ops = [(dst, "bind", src) for src, dst in plan["read_only"]] + [(p, "hide", "") for p in plan["hide"]]
    for dst, kind, src in sorted(ops, key=lambda op: (op[0].count("/"), op[1] != "hide")):
        target = new + dst
        if kind == "hide":
            _hide(target)
        elif os.path.islink(src) and os.path.dirname(dst) == "/":
            os.symlink(os.readlink(src), target)      # /lib64 -> usr/lib64 on a merged /usr
        elif os.path.exists(src):
            _bind(src, target)
            read_only(target)


def _dev(new: str, shm_size: int) -> None:
    dev = new + "/dev"
    os.makedirs(dev, exist_ok=True)
    mount("reprobot-dev", dev, "tmpfs", MS_NOSUID, "size=64k,mode=755")
    names = [n for n in DEVICES if os.path.exists("/dev/" + n)]
    names += sorted(n for n in os.listdir("/dev") if GPU_DEVICES.match(n))
    for name in names:
        _bind("/dev/" + name, dev + "/" + name)
    for name, to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                     ("stderr", "/proc/self/fd/2")):
        os.symlink(to, dev + "/" + name)
    os.makedirs(dev + "/shm")
    mount("reprobot-shm", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={shm_size},mode=1777")


def _scratch(new: str, plan: dict) -> None:
    scratch = new + plan["scratch"]
    os.makedirs(scratch, exist_ok=True)
    mount("reprobot-scratch", scratch, "tmpfs", MS_NOSUID | MS_NODEV, f"size={plan['limits']['disk']},mode=700")
    for sub in ("tmp", "home"):
        os.makedirs(f"{scratch}/{sub}", mode=0o700)
    for tmp in ("/tmp", "/var/tmp"):
        os.makedirs(new + tmp, exist_ok=True)
        mount(f"{scratch}/tmp", new + tmp, None, MS_BIND)


def _pivot(new: str) -> None:
    if SYS_PIVOT_ROOT is None:
        raise JailError(f"pivot_root: no syscall number for {platform.machine()}")
    old = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    os.chdir(new)
    # pivot_root(".", ".") stacks the old root on the new one (runc's way): detaching the old
    # one from where it sits leaves the new root alone, and no path leads back.
    _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    os.fchdir(old)
    os.close(old)
    _check(_libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def build(plan: dict) -> None:
    """Everything the posted code will see; raises JailError when any part cannot be made."""
    new = plan["new_root"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("reprobot-root", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    _layout(new, plan)
    os.makedirs(new + "/proc")
    mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _dev(new, plan["limits"]["shm"])
    _scratch(new, plan)
    _pivot(new)


def drop_network() -> None:
    _check(_libc.unshare(CLONE_NEWNET), "unshare the network")
    if [name for _, name in socket.if_nameindex() if name != "lo"]:
        raise JailError("the network is still reachable")


# --- running the steps ------------------------------------------------------------------------

def _limits(limits: dict) -> callable:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["nproc"], limits["nproc"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize"], limits["fsize"]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _tail(path: str, limit: int = 16384) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def kill_all(isolate: bool, pgid: int | None = None) -> None:
    if isolate and os.getpid() == 1:
        # PID 1 of the namespace: -1 reaches every other process in it, and nothing outside.
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
    elif pgid is not None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


FULL_MARGIN = 1 << 20          # a scratch within this of its size is full


def _folder_bytes(top: str) -> int:
    """Bytes the files under ``top`` take (allocated blocks, links not followed)."""
    total, stack = 0, [top]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += max(st.st_blocks * 512, 4096)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
    return total


def scratch_used(plan: dict) -> int:
    """What the scratch holds: the tmpfs's own count inside the sandbox; with ``isolate`` off,
    a plain folder of the runner, measured."""
    if plan["isolate"]:
        st = os.statvfs(plan["scratch"])
        return (st.f_blocks - st.f_bfree) * st.f_frsize
    return _folder_bytes(plan["scratch"])


def _wait(proc: subprocess.Popen, deadline: float, plan: dict, hit: set) -> int | None:
    """The step's exit code, or None at its deadline. As PID 1 this also reaps the orphans the
    posted code leaves (they would count against the process limit as zombies). The scratch is
    measured as it goes: full, "disk" goes into ``hit``; inside the sandbox the tmpfs's size is
    the bound, without it (``--isolation none``) the step is stopped there (None)."""
    isolate = plan["isolate"]
    next_disk, cost = 0.0, 0.0
    while time.monotonic() < deadline:
        try:
            pid, status = os.waitpid(-1 if isolate else proc.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = 0, 0
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode
        now = time.monotonic()
        if now >= next_disk:
            used = scratch_used(plan)
            cost = time.monotonic() - now
            next_disk = now + max(0.5, 4 * cost)
            if used >= plan["limits"]["disk"] - FULL_MARGIN:
                hit.add("disk")
                if not isolate:
                    return None
        if pid == 0:
            time.sleep(0.05)
    return None


def run_step(step: dict, plan: dict, logs: str, repro: str | None) -> dict:
    argv = [a.replace("{repro}", repro or "") for a in step["argv"]]
    if plan["isolate"]:
        argv = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs",
                "--", *argv]
    err_path = f"{logs}/{step['name']}.err"
    start = time.monotonic()
    with open(f"{logs}/{step['name']}.out", "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, cwd=plan["scratch"], env=plan["env"], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True, preexec_fn=_limits(plan["limits"]))
        hit: set = set()
        code = _wait(proc, start + step["wall"], plan, hit)
        kill_all(plan["isolate"], proc.pid)
    return {"name": step["name"], "exit": code, "seconds": round(time.monotonic() - start, 2),
            "stderr_tail": _tail(err_path), "limits": sorted(hit)}


def _repro_dir(store: str) -> str | None:
    try:
        names = sorted(os.listdir(store))
    except OSError:
        return None
    for name in names:
        folder = os.path.join(store, name)
        sig = os.path.join(folder, "signature.json")
        if not os.path.islink(folder) and os.path.isdir(folder) and os.path.isfile(sig) and not os.path.islink(sig):
            return folder
    return None


def sanitize(folder: str | None) -> None:
    if folder is None:
        return
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
            continue
        if stat.S_ISDIR(st.st_mode):
            continue
        os.unlink(path)


def steps(plan: dict) -> tuple[list[dict], str | None]:
    logs = os.path.join(plan["scratch"], "logs")
    os.makedirs(logs, exist_ok=True)
    done: list[dict] = []
    online = plan.get("network_first", False)
    for step in plan["steps"]:
        if online and not step.get("network"):
            drop_network()
            online = False
        repro = _repro_dir(plan["store"])
        if step.get("needs_repro") and repro is None:
            continue
        after = step.get("after")
        if after and not any(r["name"] == after["step"] and r["exit"] in after["exit"] for r in done):
            continue
        done.append(run_step(step, plan, logs, repro))
        # Nothing of the posted code runs past its step, and what it left in the repro folder is
        # plain files only: a later step reads no link (a repro.py turned into a link to a file
        # it could not read itself).
        sanitize(_repro_dir(plan["store"]))
    return done, _repro_dir(plan["store"])


# --- handing the results out --------------------------------------------------------------------

def read_plain(folder_fd: int, name: str, limit: int) -> bytes | None:
    """A regular file of at most ``limit`` bytes, never through a link."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


def _write_new(folder_fd: int, name: str, data: bytes) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder_fd)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def export(export_fd: int, repro: str | None, results: list[dict], plan: dict, error: str = "") -> None:
    names = re.compile(plan["export_names"])
    copied, total = [], 0
    if repro is not None:
        os.mkdir("repro", 0o700, dir_fd=export_fd)
        repro_out = os.open("repro", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=export_fd)
        src = os.open(repro, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for name in sorted(os.listdir(src)):
                data = names.match(name) and read_plain(src, name, plan["max_file"])
                if data is None or data is False or total + len(data) > plan["max_total"]:
                    continue
                _write_new(repro_out, name, data)
                total += len(data)
                copied.append(name)
        finally:
            os.close(src)
            os.close(repro_out)
    status = {"steps": results, "repro": os.path.basename(repro) if repro else None, "files": copied,
              "error": error}
    _write_new(export_fd, "status.json", json.dumps(status).encode())


def main(plan_path: str) -> int:
    with open(plan_path, encoding="utf-8") as fh:
        plan = json.load(fh)
    export_fd = os.open(plan["export"], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    with open(plan["script_source"], encoding="utf-8") as fh:
        script_text = fh.read()
    try:
        if plan["isolate"]:
            build(plan)
            if not plan.get("network_first"):
                drop_network()
        os.makedirs(os.path.dirname(plan["script"]), exist_ok=True)
        with open(plan["script"], "w", encoding="utf-8") as fh:
            fh.write(script_text)
    except (JailError, OSError) as e:
        export(export_fd, None, [], plan, error=f"the sandbox could not be built: {e}")
        return EXIT_JAIL
    results, repro = steps(plan)
    kill_all(plan["isolate"])
    export(export_fd, repro, results, plan)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
