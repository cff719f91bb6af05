"""The user's processes: which interpreter runs them.

Stdlib only, and nothing of bot/: the runner, the environment probe and the lockfile share it.
"""
from __future__ import annotations

import os
import shutil

from reducer.errors import ExitCode, ReprobotError


def resolve_python(python: str) -> str:
    """The interpreter ``--python`` names, as an absolute path; one line of error if it is none.

    A bare name is looked up on PATH; a path is made absolute (runs and probes start in other
    folders) but not resolved: a venv's python is a symlink whose location selects the venv."""
    exe = shutil.which(python) if os.sep not in python else python
    if not exe or not os.path.isfile(exe) or not os.access(exe, os.X_OK):
        raise ReprobotError(f"interpreter not found or not executable: {python}", ExitCode.NO_INTERPRETER)
    return os.path.abspath(exe)
