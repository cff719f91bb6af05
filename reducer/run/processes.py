"""The user's processes: which interpreter runs them, and how they are stopped.

Stdlib only, and nothing of bot/: every place that runs the user's interpreter, or stops what
it started, goes through these two.
"""
from __future__ import annotations

import os
import shutil
import signal

from reducer.errors import ExitCode, ReprobotError


def pids() -> list[int]:
    """Every process id /proc shows (none without /proc: macOS)."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def resolve_python(python: str) -> str:
    """The interpreter ``--python`` names, as an absolute path; one line of error if it is none.

    A bare name is looked up on PATH; a path is made absolute (runs and probes start in other
    folders) but not resolved: a venv's python is a symlink whose location selects the venv."""
    exe = shutil.which(python) if os.sep not in python else python
    if not exe or not os.path.isfile(exe) or not os.access(exe, os.X_OK):
        raise ReprobotError(f"interpreter not found or not executable: {python}", ExitCode.NO_INTERPRETER)
    return os.path.abspath(exe)


def script_argument(name: str) -> str:
    """``name`` as the interpreter's script argument: a script called ``-rf`` or ``-c`` is run as
    ``./-rf``, never read as an option (``python -rf`` would be -r -f). Any other name is passed as
    it is, so sys.argv[0] and argparse's ``prog`` stay what a plain run shows."""
    return "./" + name if name.startswith("-") else name


# Windows has neither killpg nor SIGKILL; os.kill with SIGTERM there is TerminateProcess.
_KILL = getattr(signal, "SIGKILL", signal.SIGTERM)


def kill_group(pid: int) -> None:
    """Kill the process group that ``pid`` leads, helpers and forked workers with it.

    Falls back to ``pid`` alone where there is no group to signal: a child forked from a zygote
    and killed before its setsid(), or a platform without killpg. A process already gone, or
    one that is no longer ours to signal, is not an error: the caller only wants it stopped."""
    killpg = getattr(os, "killpg", None)
    if killpg is not None:
        try:
            killpg(pid, _KILL)
            return
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.kill(pid, _KILL)
    except OSError:  # Windows: a pid that is gone is a plain OSError (invalid parameter)
        pass
