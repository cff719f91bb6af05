"""Resource limits of the user's runs, set in the child before the script starts (a cold run's
``preexec_fn``, a warm child right after its fork): a candidate that fork-bombs or fills the disk
fails (EAGAIN on fork, EFBIG or SIGXFSZ on write) and is simply not the failure; reprobot and the
machine go on. Also the cap on the script itself. zygote_server.py applies the same limits in the user's interpreter.
"""
from __future__ import annotations

import ast
import os
import resource     # here, not in apply_limits: an import in a child forked from threads can deadlock
from dataclasses import dataclass

from reducer.errors import ExitCode, ReprobotError
from reducer.run.processes import pids

DEFAULT_EXTRA_PROCESSES = 4096
DEFAULT_MAX_FILE_SIZE = 1 << 30
DEFAULT_MAX_DISK = 4 << 30


@dataclass(frozen=True)
class Quota:
    """What the runner watches while a run goes on (reducer/run/guard.py), and stops the run at:
    the run's processes and threads at once (its pids cgroup where one can be made, else its
    process group), and the bytes it added to its scratch folder (its copy of the script's
    folder, TMPDIR, HOME). ``file_size`` only names the rlimit when a write hit it. 0: none."""

    processes: int = DEFAULT_EXTRA_PROCESSES
    disk: int = DEFAULT_MAX_DISK
    file_size: int = DEFAULT_MAX_FILE_SIZE


@dataclass(frozen=True)
class RunLimits:
    extra_processes: int = DEFAULT_EXTRA_PROCESSES   # over the user's current count; 0: no limit
    max_file_size: int = DEFAULT_MAX_FILE_SIZE        # bytes any one file may reach; 0: no limit
    max_disk: int = DEFAULT_MAX_DISK                  # bytes one run may write in its folders; 0: no limit

    def quota(self) -> Quota:
        return Quota(self.extra_processes, self.max_disk, self.max_file_size)

    def resolved(self) -> dict[str, int]:
        """The rlimits to set, by name: RLIMIT_NPROC counts every process and thread of the user,
        so its value is today's count plus the headroom, not the headroom alone."""
        out: dict[str, int] = {}
        if self.extra_processes > 0:
            out["NPROC"] = user_tasks() + self.extra_processes
        if self.max_file_size > 0:
            out["FSIZE"] = self.max_file_size
        return out


def user_tasks(uid: int | None = None) -> int:
    """Processes and threads whose real uid is ``uid`` (default: ours), from /proc; 0 without it."""
    uid = os.getuid() if uid is None else uid
    total = 0
    for entry in pids():
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
            if int(fields[b"Uid"].split()[0]) == uid:
                total += int(fields[b"Threads"])
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return total


def apply_limits(limits: dict[str, int]) -> None:
    """Set each limit, never above the hard limit already in force (an unprivileged process
    cannot raise it, and a lower one set by the user stays)."""
    for name, value in limits.items():
        which = getattr(resource, "RLIMIT_" + name, None)
        if which is None:
            continue
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, hard))
        except (ValueError, OSError):
            pass


# A failing script worth reducing is a few hundred statements; a 10 MB one kept the passes busy
# long past --max-time in native code that no signal interrupts. Refused before any analysis.
DEFAULT_MAX_SCRIPT_BYTES = 1_000_000
DEFAULT_MAX_STATEMENTS = 10_000


def check_script_bytes(size: int, max_bytes: int = DEFAULT_MAX_SCRIPT_BYTES) -> None:
    """One line of error (ExitCode.TOO_LARGE) for a script over the byte cap (0: none), asked
    of the file's size before it is read or parsed at all."""
    if max_bytes > 0 and size > max_bytes:
        raise ReprobotError(f"the script is {size:,} bytes, over the {max_bytes:,}-byte cap "
                            "(--max-script-size raises it)", ExitCode.TOO_LARGE)


def check_statements(source: str, max_statements: int = DEFAULT_MAX_STATEMENTS) -> None:
    """One line of error (ExitCode.TOO_LARGE) for a script over the statement cap (0: none)."""
    if max_statements <= 0:
        return
    try:
        count = sum(isinstance(n, ast.stmt) for n in ast.walk(ast.parse(source)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return      # the parse error is load_script's to report
    if count > max_statements:
        raise ReprobotError(f"the script has {count:,} statements, over the {max_statements:,}-statement cap "
                            "(--max-statements raises it)", ExitCode.TOO_LARGE)
