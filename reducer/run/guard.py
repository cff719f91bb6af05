"""One run's process and disk limits, watched while it runs (issue #39).

RLIMIT_NPROC alone does not bound a run: it counts every process of the user (so it is set
relative to today's count, and other programs move it), and the kernel does not apply it to
root at all. So each run gets, where the machine lets reprobot make one, its own **pids
cgroup** with ``pids.max`` (cgroup v1's pids hierarchy, or a v2 cgroup whose subtree has the
pids controller): the kernel refuses the fork past it, whoever runs it, and every process of the
run, ``setsid`` daemons included, is found and killed through it. Where none can be made (an
unprivileged user under systemd, a read-only ``/sys`` in the Action's sandbox), the runner counts
the tasks of the run's process group every poll and stops the run at the limit; RLIMIT_NPROC
stays as the kernel's backstop for a non-root user.

The disk: every run writes in its scratch folder (its copy of the script's folder, ``TMPDIR``,
``HOME``); what it adds there is measured every second and once more after the run, and the
run is stopped past the quota. RLIMIT_FSIZE bounds each file wherever it is written.

A run stopped at a limit is "not the same failure" (the runner gives it one record naming the
limit); the original hitting one is an error of one line (reducer/failure/original.py).

Stdlib only (the Ray runner uses it on other machines).
"""
from __future__ import annotations

import atexit
import os
import signal
import stat
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from reducer.run.limits import Quota
from reducer.run.processes import pids

_PREFIX = "reprobot-run-"
_DISK_EVERY = 1.0           # seconds between two measures of a run's folder


# ---- the pids cgroup ------------------------------------------------------------------------
def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root, mount point, fstype, super options) of the cgroup mounts of this process."""
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                    unescape = (lambda p: p.encode().decode("unicode_escape"))
                    out.append((unescape(fields[3]), unescape(fields[4]), rest[0], set(rest[2].split(","))))
    except OSError:
        pass
    return out


def _own_cgroups() -> dict[str, str]:
    """Controller ("pids", or "" for the v2 unified hierarchy) -> this process's cgroup path."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            for line in fh:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3:
                    for name in parts[1].split(",") if parts[1] else [""]:
                        out[name] = parts[2]
    except OSError:
        pass
    return out


def _under(mount_root: str, point: str, path: str) -> str | None:
    """Where cgroup ``path`` is in a mount of ``mount_root`` at ``point`` (None: not in it)."""
    if mount_root == "/":
        rel = path.lstrip("/")
    elif path == mount_root:
        rel = ""
    elif path.startswith(mount_root + "/"):
        rel = path[len(mount_root) + 1:]
    else:
        return None
    return os.path.join(point, rel)


def pids_parent() -> str | None:
    """The folder a run's pids cgroup is made in: our own cgroup, in the v1 pids hierarchy or
    in v2 where its subtree has the pids controller. None when there is neither."""
    own = _own_cgroups()
    for root, point, fstype, options in _mounts():
        if fstype == "cgroup" and "pids" in options and "pids" in own:
            found = _under(root, point, own["pids"])
        elif fstype == "cgroup2" and "" in own:
            found = _under(root, point, own[""])
            try:
                with open(os.path.join(found or "", "cgroup.subtree_control"), encoding="ascii") as fh:
                    if "pids" not in fh.read().split():
                        found = None
            except OSError:
                found = None
        else:
            continue
        if found and os.path.isdir(found):
            return found.rstrip("/") or "/"
    return None


_PARENT: list[str | None] = []        # found once; [None] once making one failed
# Run cgroups that could not be removed yet (a killed process still exiting): tried again when the
# next one is made, and when reprobot exits.
_PENDING: list[str] = []


def _parent() -> str | None:
    if not _PARENT:
        _PARENT.append(pids_parent())
    return _PARENT[0]


def _read_int(path: str, key: str | None = None) -> int:
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read()
    except OSError:
        return 0
    if key is None:
        return int(text.strip()) if text.strip().isdigit() else 0
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


@dataclass
class PidsCgroup:
    """One run's pids cgroup: made before the run, entered by its first process, emptied and
    removed after it."""

    path: str

    @classmethod
    def make(cls, limit: int) -> "PidsCgroup | None":
        parent = _parent()
        if parent is None:
            return None
        _retry_pending()
        path = os.path.join(parent, f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}")
        try:
            os.mkdir(path)
        except OSError:
            _PARENT[:] = [None]          # not writable here: no run tries again
            return None
        try:
            with open(os.path.join(path, "pids.max"), "w", encoding="ascii") as fh:
                fh.write(str(limit))
        except OSError:
            _remove(path)
            _PARENT[:] = [None]
            return None
        return cls(path)

    @property
    def procs(self) -> str:
        return os.path.join(self.path, "cgroup.procs")

    def count(self) -> int:
        return _read_int(os.path.join(self.path, "pids.current"))

    def refused(self) -> bool:
        """Whether the kernel refused a fork of the run at pids.max."""
        return _read_int(os.path.join(self.path, "pids.events"), "max") > 0

    def kill(self) -> None:
        _kill_members(self.path)

    def remove(self) -> None:
        if not _remove(self.path):
            _PENDING.append(self.path)


def enter(procs: str | None) -> None:
    """Move the calling process into the cgroup whose ``cgroup.procs`` this is (in a run's first
    process, before the script starts; os calls only: it runs between fork and exec)."""
    if not procs:
        return
    try:
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
    except OSError:
        pass        # the runner still counts the run's process group


def _members(path: str) -> list[int]:
    try:
        with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as fh:
            return [int(x) for x in fh.read().split()]
    except (OSError, ValueError):
        return []


def _kill_members(path: str, wait: float = 1.0) -> None:
    """SIGKILL everything in the cgroup until it is empty (a process forking meanwhile is caught
    by the next round); cgroup.kill where the kernel has it (v2, Linux 5.14)."""
    kill_file = os.path.join(path, "cgroup.kill")
    if os.path.exists(kill_file):
        try:
            with open(kill_file, "w", encoding="ascii") as fh:
                fh.write("1")
        except OSError:
            pass
    end = time.monotonic() + wait
    while True:
        members = _members(path)
        if not members or time.monotonic() > end:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def _remove(path: str, wait: float = 0.5) -> bool:
    """rmdir, retried a moment while the killed processes finish exiting; whether it is gone."""
    end = time.monotonic() + wait
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > end:
                return False
            time.sleep(0.02)


def _retry_pending() -> None:
    for path in list(_PENDING):
        if _remove(path, wait=0):
            _PENDING.remove(path)


atexit.register(_retry_pending)


def remove_stale() -> int:
    """Empty and remove the run cgroups of a reprobot that is gone (killed before its runs
    ended); how many."""
    parent = _parent()
    if parent is None:
        return 0
    removed = 0
    try:
        names = os.listdir(parent)
    except OSError:
        return 0
    for name in names:
        if not name.startswith(_PREFIX):
            continue
        owner = name[len(_PREFIX):].split("-", 1)[0]
        if not owner.isdigit() or int(owner) == os.getpid():
            continue
        try:
            os.kill(int(owner), 0)
            continue
        except ProcessLookupError:
            pass
        except OSError:
            continue
        path = os.path.join(parent, name)
        _kill_members(path)
        _remove(path)
        removed += 1
    return removed


def group_tasks(pgid: int) -> int:
    """Processes and threads of a process group now (Linux /proc; 0 elsewhere)."""
    tasks = 0
    for entry in pids():
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
            # after the parenthesised command name: state ppid pgrp ...; num_threads is field 20
            fields = data[data.rindex(b")") + 2:].split()
            if int(fields[2]) == pgid:
                tasks += int(fields[17])
        except (OSError, ValueError, IndexError):
            continue
    return tasks


# ---- the disk --------------------------------------------------------------------------------
def disk_usage(folder: Path, stop_above: int | None = None) -> int:
    """Bytes the files under ``folder`` take on disk (allocated blocks, each inode once, links
    not followed, every entry at least a block: a million empty files are not free). Stops
    counting once past ``stop_above``."""
    total, seen = 0, set()
    stack = [str(folder)]
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
                if (st.st_dev, st.st_ino) in seen:
                    continue
                if st.st_nlink > 1:
                    seen.add((st.st_dev, st.st_ino))
                total += max(getattr(st, "st_blocks", 0) * 512, 4096)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
                if stop_above is not None and total > stop_above:
                    return total
    return total


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            value = n / (1 << shift)
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def process_limit_text(limit: int) -> str:
    return f"the run hit the process limit ({limit} processes and threads at once, --max-processes)"


def disk_limit_text(limit: int) -> str:
    return f"the run hit the disk limit (over {_size(limit)} written in its folders, --max-disk)"


def file_limit_text(limit: int) -> str:
    # "File too large" is what Python says for EFBIG: the words a reader searches for
    return f"the run hit the file size limit ({_size(limit)} per file, --max-file-size): File too large"


# ---- one run -----------------------------------------------------------------------------------
@dataclass
class RunGuard:
    """The process and disk limits of one run: ``poll`` while it runs, ``finish`` after its
    processes were killed. ``hit``: the limit's one line once one was reached."""

    quota: Quota
    scratch: Path
    cgroup: PidsCgroup | None = None
    hit: str | None = None
    peak_tasks: int = 0
    _baseline: int = 0
    _next_disk: float = 0.0
    _disk_seconds: float = field(default=0.0, repr=False)

    @classmethod
    def start(cls, quota: Quota, scratch: Path) -> "RunGuard":
        guard = cls(quota, scratch)
        if quota.processes > 0:
            guard.cgroup = PidsCgroup.make(quota.processes)
        if quota.disk > 0:
            # what the run starts with (the copy of the script's folder) is not what it wrote
            guard._baseline = disk_usage(scratch)
            # a run shorter than this is measured once, when it ends (``finish``)
            guard._next_disk = time.monotonic() + _DISK_EVERY
        return guard

    @property
    def procs(self) -> str | None:
        """The cgroup.procs file the run's first process enters, or None."""
        return self.cgroup.procs if self.cgroup is not None else None

    def poll(self, pgid: int, now: float) -> str | None:
        """While the run goes on (``pgid``: its process group; ``now``: time.monotonic())."""
        if self.hit is None and self.quota.processes > 0:
            # the cgroup holds every process of the run (a setsid daemon too); without one (or
            # when the run could not enter it), its process group
            tasks = (self.cgroup.count() if self.cgroup is not None else 0) or group_tasks(pgid)
            self.peak_tasks = max(self.peak_tasks, tasks)
            if tasks >= self.quota.processes or (self.cgroup is not None and self.cgroup.refused()):
                self.hit = process_limit_text(self.quota.processes)
        if self.hit is None and self.quota.disk > 0 and now >= self._next_disk:
            self._check_disk()
            # a folder of many files takes a while to measure: never more than a fifth of the time
            self._next_disk = time.monotonic() + max(_DISK_EVERY, 4 * self._disk_seconds)
        return self.hit

    def _check_disk(self) -> None:
        t0 = time.monotonic()
        used = disk_usage(self.scratch, stop_above=self._baseline + self.quota.disk) - self._baseline
        self._disk_seconds = time.monotonic() - t0
        if used > self.quota.disk:
            self.hit = disk_limit_text(self.quota.disk)

    def finish(self) -> str | None:
        """Once the run's group is killed: its cgroup emptied and removed, its folder measured a
        last time (a run that wrote fast and ended between two polls)."""
        if self.cgroup is not None:
            self.cgroup.kill()
            if self.hit is None and self.cgroup.refused():
                self.hit = process_limit_text(self.quota.processes)
            self.cgroup.remove()
        if self.hit is None and self.quota.disk > 0:
            self._check_disk()
        return self.hit
