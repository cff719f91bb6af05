"""What the System-Info renderers of bot/targets/ share: reading env.json, and the lines every
block ends with (install sources, import failures, CUDA build and GPUs).

Each target module renders the shape its own repository's command prints (``transformers
env``, ``accelerate env``, ``python -m bitsandbytes``, ``trl env``, ``python -m
torch.utils.collect_env``; for peft the versions its form asks for), so a maintainer sees what
they expect. Built from env.json rather than by running those commands, so it works when they
crash, are missing, or the failing machine is not this one. Lines after the command's own
fields are additions reprobot knows and the commands do not print; they come last so the
familiar part reads unchanged.
"""
from __future__ import annotations

from packaging.utils import (InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename,
                             parse_wheel_filename)

# The packages whose non-index installs and failed imports every block notes.
INSTALL_NOTED = ("torch", "transformers", "peft", "accelerate", "bitsandbytes", "safetensors", "huggingface_hub",
                 "tokenizers")


def pkg(env: dict, name: str) -> dict:
    found = (env.get("packages") or {}).get(name)
    return found if isinstance(found, dict) else {"installed": False}


def version_of(env: dict, name: str, absent: str = "not installed") -> str:
    p = pkg(env, name)
    return str(p.get("version")) if p.get("installed") and p.get("version") else absent


def platform_of(env: dict) -> str:
    return (env.get("platform") or {}).get("platform") or "unknown"


def python_of(env: dict) -> str:
    return (env.get("python") or {}).get("version") or "unknown"


def torch_of(env: dict) -> dict:
    return env.get("torch") or {}


def gpu_names(env: dict) -> list[str]:
    gpus = (env.get("gpu") or {}).get("gpus") or []
    return [g.get("name") or "unknown" for g in gpus]


def fields(items: list[tuple[str, str]]) -> str:
    return "\n".join(f"- {k}: {v}" for k, v in items)


def accelerate_config_lines(env: dict, absent: str) -> str:
    # `transformers env` and `accelerate env` both print a found config as tab-indented lines.
    cfg = env.get("accelerate_config") or {}
    if cfg.get("found") and isinstance(cfg.get("config"), dict):
        return "\n".join(f"\t- {k}: {v}" for k, v in cfg["config"].items())
    if cfg.get("found"):
        return "\t(found, unreadable: " + str(cfg.get("load_error") or "not a mapping") + ")"
    return f"\t{absent}"


def local_name(url: str | None) -> str | None:
    """The file or folder name of a file:// URL (None for a remote one): where it sits on the
    user's disk means nothing to a maintainer and may name the user."""
    if not url or not url.startswith("file:"):
        return None
    return url.rstrip("/").rsplit("/", 1)[-1] or "?"


# How a distribution not from an index was installed (PEP 610 direct_url.json), in words.
PRIVATE_KINDS = {"vcs": "a VCS checkout", "editable": "an editable folder", "local-dir": "a local folder",
                 "archive": "an archive"}


def release_copy(name: str, version: str, url: str | None) -> bool:
    """A local copy of one of the index's own release files (a wheel carried onto a machine with
    no network): the same name and version, no local label, so the index has the same thing and
    ``name==version`` re-creates it. Anything else installed from a file is a private source."""
    local = local_name(url)
    if not local or "+" in version:
        return False
    try:
        if local.endswith(".whl"):
            dist, parsed, _, _ = parse_wheel_filename(local)
        else:
            dist, parsed = parse_sdist_filename(local)
    except (InvalidWheelFilename, InvalidSdistFilename):
        return False
    return canonicalize_name(dist) == canonicalize_name(name) and str(parsed) == version


def install_notes(env: dict, names: tuple[str, ...] = INSTALL_NOTED) -> list[tuple[str, str]]:
    """Packages not installed from an index, and imports that failed: what the commands hide."""
    notes = []
    for name in names:
        p = pkg(env, name)
        if not p.get("installed"):
            continue
        kind = p.get("kind")
        # env.json's own word first (bot/env/privacy.py marks a source it hid); else the record decides.
        private = p.get("private_source") is True or (
            kind in PRIVATE_KINDS and not (kind == "archive" and release_copy(name, str(p.get("version")), p.get("url"))))
        if private and kind in PRIVATE_KINDS:
            # Where it came from is the reporter's (a URL, a VCS checkout, a folder): never a
            # place to tell a maintainer to install from, so only the kind of source is said.
            notes.append((f"{name} installed from", f"a private source ({PRIVATE_KINDS[kind]}), version "
                          f"{p.get('version')}; not installable from here"))
        imp = p.get("import")
        if imp and imp != "ok":
            notes.append((f"{name} import", f"FAILED ({imp})"))
        if p.get("module_version"):
            notes.append((f"{name}.__version__", f"{p['module_version']} (metadata says {p.get('version')})"))
    return notes


def cuda_notes(env: dict) -> list[tuple[str, str]]:
    t = torch_of(env)
    gpu = env.get("gpu") or {}
    notes = []
    if t.get("cuda_built") or t.get("hip_built"):
        built = f"CUDA {t['cuda_built']}" if t.get("cuda_built") else f"ROCm {t['hip_built']}"
        notes.append(("PyTorch built with", built + (f", cuDNN {t['cudnn']}" if t.get("cudnn") else "")))
    gpus = gpu.get("gpus") or []
    if gpus:
        desc = [f"{g.get('name')} ({g['memory_bytes'] / 1024 ** 3:.1f} GiB)" if g.get("memory_bytes")
                else str(g.get("name")) for g in gpus]
        notes.append(("GPUs", "; ".join(desc)))
    if gpu.get("driver_version"):
        notes.append(("NVIDIA driver", gpu["driver_version"]))
    return notes
