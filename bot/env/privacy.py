"""What env.json keeps of the machine a failure ran on: what a maintainer needs to reproduce it,
never whose machine, network or company it was. Applied to the probe's record before the
scrubber (bot/scrub.py) sees it, because here each value's meaning is known, where the scrubber
only sees text:

- the interpreter is named by the kind of environment it is (``venv``, ``conda env``,
  ``system``): its path, and wherever another field repeats its folder (a command's location,
  LD_LIBRARY_PATH), becomes ``<venv>``, ``<conda env>`` or ``<system python>``;
- variables that hold a machine (MASTER_ADDR, ``*_HOST``, ``*_ENDPOINT``, SLURM node lists) and
  accelerate's ``main_process_ip`` record ``<host>`` (loopback is kept: it says "one machine");
- a distribution that is not on PyPI is recorded as "private package (not on PyPI)", numbered,
  with its version's public part. reprobot runs offline, so the rule is what the install itself
  says: a local version label other than the accelerator builds PyTorch's own index publishes
  (``+cpu``, ``+cu130``, ``+rocm6.4``, ``+xpu``: PyPI refuses any local label), or a PEP 610
  direct_url.json (a VCS checkout, a folder, an archive) from anywhere but an upstream project
  on a public code host. A distribution reprobot records by name (the stack, its support
  libraries, what the targets' System Info lists) keeps it. A private index's release with no
  local label cannot be told offline and keeps its name;
- a VCS, folder or archive URL is kept only for an upstream project on a public code host
  (github.com/huggingface/transformers@<commit> says what a maintainer can install); anyone
  else's is dropped with the branch it named, and an archive keeps only its file name.
"""
from __future__ import annotations

import copy
import re
from typing import Any, Iterable

from packaging.utils import canonicalize_name

from bot.scrub import PUBLIC_CODE_OWNERS

PRIVATE_PACKAGE = "private package (not on PyPI)"
# Local version labels of PyTorch's own index (and JAX's): public builds of public packages.
PUBLIC_LOCAL_LABEL = re.compile(r"cpu|cu\d+|rocm\d+(?:\.\d+)*|xpu|hpu|cuda\d+(?:\.cudnn\d+)?", re.IGNORECASE)
_DIRECT_KINDS = ("vcs", "editable", "local-dir", "archive")
_PUBLIC_HOSTS = ("github.com", "gitlab.com", "bitbucket.org")
# Variables whose value is a machine: MASTER_ADDR, RDZV_ENDPOINT, SLURM_JOB_NODELIST, HOSTNAME, ...
_HOST_VAR = re.compile(r"(?:^|_)(?:ADDR|ADDRESS|HOST|HOSTNAME|HOSTS|ENDPOINT|SERVER|NODELIST|NODENAME|IP)$")
_HOST_KEY = re.compile(r"(?i)(?:^|_)(?:ip|addr|address|host|hostname|hosts|endpoint|hostfile)$")
_RAW_HOST_LINE = re.compile(r"(?im)^([ \t]*[\w-]*?(?:ip|addr|address|host|hostname|hosts|endpoint|hostfile)[ \t]*:[ \t]*)"
                            r"['\"]?([^'\"\n#]*?)['\"]?[ \t]*$")
_LOOPBACK = re.compile(r"localhost(?:\.localdomain)?|127(?:\.\d{1,3}){3}|::1|0\.0\.0\.0|\[::1\]")


def environment_kind(python: dict) -> str:
    """``venv`` (a virtualenv, whatever it was made from), ``conda env`` or ``system``."""
    if python.get("virtualenv"):
        return "venv"
    if python.get("conda"):
        return "conda env"
    return "system"


def _public_source(url: str | None) -> bool:
    """A VCS or archive URL of an upstream project on a public code host."""
    m = re.match(r"(?:git\+|hg\+)?(?:https?|ssh|git)://(?:[^@/]+@)?([^/:]+)[/:]([^/]+)/", url or "")
    return bool(m) and m.group(1).lower() in _PUBLIC_HOSTS and m.group(2).lower() in PUBLIC_CODE_OWNERS


def _local_label(version: str) -> str | None:
    return version.split("+", 1)[1] if "+" in version else None


def private_distribution(info: dict, known: Iterable[str]) -> bool:
    """``info`` (one of the probe's distributions) is not on PyPI, by the rule above."""
    name = canonicalize_name(str(info.get("name") or ""))
    if name in {canonicalize_name(k) for k in known}:
        return False
    label = _local_label(str(info.get("version") or ""))
    if label and not PUBLIC_LOCAL_LABEL.fullmatch(label):
        return True
    if _release_copy(info):
        return False
    return info.get("kind") in _DIRECT_KINDS and not _public_source(info.get("url"))


def _release_copy(info: dict) -> bool:
    """A wheel or sdist of an index release carried onto the machine (the GPU example's
    bitsandbytes): the index has the same file, so it is public whatever folder it came from."""
    from bot.targets.sysinfo import release_copy
    return info.get("kind") == "archive" and release_copy(str(info.get("name") or ""), str(info.get("version") or ""),
                                                          info.get("url"))


def _public_version(version: str) -> str:
    return version.split("+", 1)[0] + ("+<local>" if "+" in version else "")


def _archive_name(url: str) -> str:
    """What a maintainer may see of an archive's URL: its file name (``file://…/x.whl``), which
    sysinfo.release_copy reads to tell a carried copy of an index release from a private build."""
    return "file://\u2026/" + url.rstrip("/").rsplit("/", 1)[-1]


def _source(pkg: dict) -> dict:
    """A package's record without where a private source lives."""
    if pkg.get("kind") not in _DIRECT_KINDS or _public_source(pkg.get("url")):
        return pkg
    if _release_copy(pkg):
        return {**pkg, "url": _archive_name(str(pkg["url"]))}   # where it sat on the disk is nobody's business
    pkg = dict(pkg)
    url = pkg.pop("url", None)
    pkg.pop("requested_revision", None)
    if pkg.get("kind") == "archive" and url and url.startswith("file:"):
        pkg["url"] = _archive_name(url)  # a file carried onto the machine; a URL's host is the poster's
    if pkg.get("kind") in ("editable", "local-dir"):
        pkg.pop("location", None)  # the checkout's folder, not the environment's
    pkg["private_source"] = True
    return pkg


def _host_value(value: Any) -> Any:
    return value if not isinstance(value, str) or not value or _LOOPBACK.fullmatch(value.strip()) else "<host>"


def _hosts_in(config: Any) -> Any:
    """accelerate's config (and its deepspeed part) with every machine it names replaced."""
    if isinstance(config, dict):
        return {k: _host_value(v) if isinstance(k, str) and _HOST_KEY.search(k) else _hosts_in(v)
                for k, v in config.items()}
    if isinstance(config, list):
        return [_hosts_in(v) for v in config]
    return config


def _replace_roots(value: Any, roots: list[tuple[str, str]]) -> Any:
    """Every string with the interpreter's folders replaced by their kind (at a path boundary)."""
    if isinstance(value, str):
        for root, label in roots:
            # a path into a package in site-packages is left whole: the scrubber writes <env>/<package>/...
            value = re.sub(rf"(?<![\w.-]){re.escape(root)}(?=[/\\:;]|$)(?![/\\][^:;]*?(?:site|dist)-packages[/\\])",
                           lambda _m, lab=label: lab, value)
        return value
    if isinstance(value, dict):
        return {k: _replace_roots(v, roots) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_roots(v, roots) for v in value]
    return value


def private_env(env: dict, raw: dict, known: Iterable[str]) -> dict:
    """``env`` (probe.shape_env of ``raw``) with only what a maintainer needs: see the module's
    docstring. ``known``: the distributions reprobot records by name."""
    env = copy.deepcopy(env)
    known = tuple(known)
    py = env.get("python") or {}
    kind = environment_kind(py)
    # The environment's own folder carries its name (a conda env, a venv named after a person); a
    # system interpreter's (/usr) names nobody, and replacing it would misname /usr/lib.
    roots = [(p, f"<{kind}>") for p in (py.get("prefix"),) if p and kind != "system"]
    base = py.get("base_prefix")
    if base and base != py.get("prefix") and re.search(r"[\\/]envs[\\/]", base):
        roots.append((base, "<conda env>"))
    for key in ("executable", "prefix", "base_prefix"):
        py.pop(key, None)
    if py:
        py["environment"] = kind
    env["packages"] = {name: _source(p) if isinstance(p, dict) else p for name, p in (env.get("packages") or {}).items()}
    dists = (raw.get("distributions") or {}).get("distributions") or []
    private = sorted({str(d.get("name")) for d in dists if isinstance(d, dict) and private_distribution(d, known)},
                     key=lambda n: canonicalize_name(n))
    labels = {name: f"{PRIVATE_PACKAGE} #{i}" for i, name in enumerate(private, 1)}
    env["distributions"] = {labels.get(n, n): _public_version(str(v)) if n in labels else v
                            for n, v in (env.get("distributions") or {}).items()}
    env["shadowed_distributions"] = [labels.get(n, n) for n in env.get("shadowed_distributions") or []]
    env["env_vars"] = {k: _host_value(v) if _HOST_VAR.search(k) else v for k, v in (env.get("env_vars") or {}).items()}
    cfg = env.get("accelerate_config")
    if isinstance(cfg, dict) and "config" in cfg:
        cfg["config"] = _hosts_in(cfg["config"])
    if isinstance(cfg, dict) and isinstance(cfg.get("raw"), str):  # the file's text, when nothing could parse it
        cfg["raw"] = _RAW_HOST_LINE.sub(lambda m: m.group(1) + _host_value(m.group(2)), cfg["raw"])
    return _replace_roots(env, roots)
