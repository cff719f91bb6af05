"""Each run's own home (issue #39): HOME and the XDG folders inside the run's scratch folder.

A candidate is the user's script with parts cut away, so a line that appends to ``~/.bashrc`` or
writes under ``Path.home()`` runs once per candidate; with the user's HOME it wrote into the
user's real dotfiles. Every run therefore gets ``HOME`` and ``XDG_CONFIG_HOME`` /
``XDG_CACHE_HOME`` / ``XDG_DATA_HOME`` / ``XDG_STATE_HOME`` in its scratch folder, which is
deleted after the run: ``os.path.expanduser`` and ``Path.home()`` read HOME on every call, so
cold runs, warm children (their environment is the run's), their spawn children and launcher
ranks all land there.

What a run must still find is the user's caches, or an offline run would no longer find its
models: the Hugging Face cache (``HF_HOME``, which holds the hub and datasets caches and the
token a gated model needs), torch hub (``TORCH_HOME``), Triton's compiled kernels
(``TRITON_CACHE_DIR``), CUDA's JIT cache (``CUDA_CACHE_PATH``) and packages installed with
``pip install --user`` (``PYTHONUSERBASE``). Each is pointed at where the user's own run would
find it, computed from reprobot's environment before HOME moves; a variable the user set is left
as it is. They stay writable locally: a run is the user's own process and could reach those
folders by absolute path anyway; what this removes is the accident of ``~`` meaning the user's
home. A path spelled out absolutely, or the home ``pwd.getpwuid`` reports, still reaches the
user's files: locally this is no sandbox (the Action's is: bot/action/sandbox.py, where the host
is read-only and the job's home is a scratch one). Inductor's cache is under TMPDIR, already the
run's own.

Stdlib only: the Ray runner builds runs on other machines from the same code.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

HOME_DIR = "home"   # the run's home, beside work/ and tmp/ in its scratch folder
# XDG variable -> the folder under the home the XDG spec defaults it to
XDG_FOLDERS = {"XDG_CONFIG_HOME": ".config", "XDG_CACHE_HOME": ".cache", "XDG_DATA_HOME": ".local/share",
               "XDG_STATE_HOME": ".local/state"}


def _real_home(environ: Mapping[str, str]) -> Path:
    home = environ.get("HOME")
    if home:
        return Path(home)
    try:
        return Path.home()
    except (RuntimeError, KeyError):        # no HOME and no passwd entry
        return Path(os.sep)


def user_caches(environ: Mapping[str, str]) -> dict[str, str]:
    """Where the user's caches are, as each library would find them with this environment:
    the variable when it is set, else the library's own default under XDG_CACHE_HOME or HOME."""
    home = _real_home(environ)
    xdg_cache = Path(environ.get("XDG_CACHE_HOME") or home / ".cache")
    out = {
        "HF_HOME": environ.get("HF_HOME") or str(xdg_cache / "huggingface"),
        "TORCH_HOME": environ.get("TORCH_HOME") or str(xdg_cache / "torch"),
        "TRITON_CACHE_DIR": environ.get("TRITON_CACHE_DIR")
        or str(Path(environ.get("TRITON_HOME") or home) / ".triton" / "cache"),
        "CUDA_CACHE_PATH": environ.get("CUDA_CACHE_PATH") or str(home / ".nv" / "ComputeCache"),
    }
    # site.py finds the user's site-packages under ~/.local (POSIX) unless told otherwise; a
    # macOS framework build uses ~/Library/Python/X.Y, which needs the interpreter's version.
    if environ.get("PYTHONUSERBASE"):
        out["PYTHONUSERBASE"] = environ["PYTHONUSERBASE"]
    elif os.name == "posix" and (home / ".local").is_dir():
        out["PYTHONUSERBASE"] = str(home / ".local")
    return out


def home_variables(folder: Path) -> dict[str, str]:
    """HOME and the XDG folders for a home at ``folder``."""
    out = {"HOME": str(folder)}
    out.update({name: str(folder / sub) for name, sub in XDG_FOLDERS.items()})
    if sys.platform == "win32":
        out["USERPROFILE"] = str(folder)
    return out


def make_home(scratch: Path) -> Path:
    """The run's home under ``scratch``, with its XDG folders (a script may expect them)."""
    home = scratch / HOME_DIR
    for sub in XDG_FOLDERS.values():
        (home / sub).mkdir(parents=True, exist_ok=True)
    return home


def run_home_environment(env: dict[str, str], home: Path, caches: Mapping[str, str]) -> dict[str, str]:
    """``env`` with its own home at ``home`` and the user's caches where ``env`` names none."""
    out = dict(env)
    for name, value in caches.items():
        out.setdefault(name, value)
    out.update(home_variables(home))
    return out
