"""The one registry of targets, and every list the rest of reprobot derives from it.

The built-in targets are the modules of this package that define ``TARGET`` (found by
listing the package, so adding a target is adding its module); ``register()`` adds one at
run time (a test fixture, a plugin). Every reader goes through the functions here, or the
live views ``TARGETS`` and ``REPO_KEYS``, so a registered target is seen everywhere at once.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from bot.targets.base import ProbeSection, Target
from reducer import stack as engine_stack
from reducer.errors import ExitCode, ReprobotError
from reducer.stack import Spelling

# Owners routing can name that reprobot does not file at: where the verdict sends the reader.
ELSEWHERE: dict[str, str] = {
    "huggingface_hub": "huggingface/huggingface_hub",
    "safetensors": "huggingface/safetensors",
    "tokenizers": "huggingface/tokenizers",
    "datasets": "huggingface/datasets",
    "diffusers": "huggingface/diffusers",
    "user code": "",
}
# Packages that are not targets but whose frames routing must still recognise when a forum
# mangled a path or a checkout is installed in editable mode: package -> checkout parent.
OTHER_CHECKOUTS: dict[str, str] = {"huggingface_hub": "src"}

# Modules of this package that are its machinery, not targets.
_MACHINERY = frozenset({"base", "registry", "sysinfo"})


def _builtin() -> tuple[Target, ...]:
    found = []
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name in _MACHINERY or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        target = getattr(module, "TARGET", None)
        if not isinstance(target, Target):
            raise ImportError(f"bot/targets/{info.name}.py defines no TARGET: every module here but "
                              f"{', '.join(sorted(_MACHINERY))} is one target")
        found.append(target)
    return tuple(sorted(found, key=lambda t: (t.order, t.key)))


_REGISTRY: dict[str, Target] = {}


def register(target: Target) -> Target:
    """Add ``target`` (after the others). A key or package already registered is refused: two
    owners for one package would make routing depend on registration order."""
    if target.key in _REGISTRY:
        raise ValueError(f"target {target.key!r} is already registered")
    clash = set(target.packages) & set(package_targets())
    if clash:
        raise ValueError(f"package(s) {sorted(clash)} already belong to another target")
    _REGISTRY[target.key] = target
    _CHECKOUTS.clear()
    return target


def unregister(key: str) -> Target:
    _CHECKOUTS.clear()
    return _REGISTRY.pop(key)


def targets() -> tuple[Target, ...]:
    return tuple(_REGISTRY.values())


def repo_keys() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get_target(key: str) -> Target:
    """A target by key ("peft") or repo ("owner/name"); a clear usage error otherwise."""
    found = _REGISTRY.get(key) or target_for_repo(key)
    if found is None:
        raise ReprobotError(f"unknown repository {key!r} (expected one of: {', '.join(_REGISTRY)})", ExitCode.USAGE)
    return found


def target_for_repo(repo: str | None) -> Target | None:
    low = (repo or "").lower()
    return next((t for t in _REGISTRY.values() if t.repo.lower() == low), None)


def package_targets() -> dict[str, Target]:
    """Import name -> its target, for every registered target (torch included)."""
    return {pkg: t for t in _REGISTRY.values() for pkg in t.packages}


def stack_packages() -> frozenset[str]:
    """The packages whose frames are evidence of their own: every target's but the foundation's."""
    return frozenset(pkg for t in _REGISTRY.values() if not t.foundation for pkg in t.packages)


def _foundation_first() -> list[Target]:
    return sorted(_REGISTRY.values(), key=lambda t: not t.foundation)


def ordered_packages() -> tuple[str, ...]:
    """Every target's import names, the foundation's first, then in the order commands list
    targets: the order env.json records them and a draft's `pip install` line names them."""
    return tuple(pkg for t in _foundation_first() for pkg in t.packages)


def ordered_dists() -> tuple[str, ...]:
    """The same, as pip names them."""
    return tuple(d for t in _foundation_first() for d in t.dists)


def versions_packages() -> tuple[str, ...]:
    """What `reprobot versions` swaps by default, in the order a maintainer reads them."""
    return tuple(d for t in _REGISTRY.values() if t.versions_swaps for d in t.dists)


def versions_shown() -> tuple[str, ...]:
    """The columns of the `versions` table: what it swaps, after the foundation it runs on."""
    return tuple(dict.fromkeys((*(d for t in _REGISTRY.values() if t.foundation for d in t.dists),
                                *versions_packages())))


def git_repos() -> dict[str, str]:
    """Distribution -> the GitHub repository `versions --git NAME@REF` installs it from."""
    return {d: t.repo for t in _REGISTRY.values() if t.versions_swaps for d in t.dists}


def probe_imports() -> tuple[str, ...]:
    """Packages the environment probe imports one by one, to record a broken install."""
    return tuple(pkg for t in _REGISTRY.values() if t.probe_import for pkg in t.packages)


def repo_of_package(pkg: str | None) -> str | None:
    """The repository that owns a routing candidate (a package name, or an ELSEWHERE owner)."""
    t = package_targets().get(pkg or "")
    return t.repo if t else (ELSEWHERE.get(pkg or "") or None)


def known_owner(pkg: str | None) -> bool:
    return (pkg or "") in package_targets() or (pkg or "") in ELSEWHERE


def owner_packages() -> tuple[str, ...]:
    """Every package routing can name as an owner: the targets' and those filed ELSEWHERE."""
    return tuple(dict.fromkeys((*package_targets(), *(p for p, repo in ELSEWHERE.items() if repo))))


def api_names() -> tuple[tuple[str, str], ...]:
    """(package, regex) in the order routing tries them (``api_rank``, then registration)."""
    ranked = sorted((t for t in _REGISTRY.values() if t.api_names), key=lambda t: t.api_rank)
    return tuple((t.packages[0], t.api_names) for t in ranked if t.api_names)


def api_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return _compiled(api_names())


@lru_cache(maxsize=8)
def _compiled(names: tuple[tuple[str, str], ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((pkg, re.compile(pattern)) for pkg, pattern in names)


def callee_packages() -> dict[str, str]:
    """A callee's name in a rejected call's message -> the package it belongs to."""
    return {name: t.packages[0] for t in _REGISTRY.values() for name in t.callee_names}


def area_prefixes() -> tuple[tuple[str, str], ...]:
    return tuple(pair for t in _REGISTRY.values() for pair in t.area_prefixes)


def checkout_parents() -> dict[str, str]:
    """package -> the folder an editable checkout keeps it in (targets first, then the others)."""
    out = {pkg: t.checkout_parent for t in _REGISTRY.values() if t.checkout_parent for pkg in t.packages}
    return {**out, **{k: v for k, v in OTHER_CHECKOUTS.items() if k not in out}}


def system_info_clis() -> tuple[str, ...]:
    """The targets' own System Info commands that are programs of their own (``accelerate env``,
    not ``python -m ...``): the probe records where each is installed."""
    words = (t.system_info_command.split()[0] for t in _REGISTRY.values() if t.system_info_command)
    return tuple(dict.fromkeys(w for w in words if not w.startswith("python")))


def env_packages() -> tuple[str, ...]:
    """Distributions the System-Info renderers name, for the probe to record."""
    return tuple(dict.fromkeys(p for t in _REGISTRY.values() for p in (*t.packages, *t.env_packages)))


def probe_sections() -> tuple[ProbeSection, ...]:
    """Each target's own section of the environment probe, in the order commands list targets."""
    return tuple(t.probe_section for t in _REGISTRY.values() if t.probe_section)


def family_owners() -> tuple[Target, ...]:
    """The targets that own model families (routing reads their path and class patterns)."""
    return tuple(t for t in _REGISTRY.values() if t.family_path or t.family_class)


def integration_home() -> Target | None:
    """Where a failure across three of the stack's packages on its models is filed."""
    return next((t for t in _REGISTRY.values() if t.integration_home), None)


def checkout_packages() -> frozenset[str]:
    """Every package whose editable checkout is library code to the engine's frame normaliser:
    the targets' and every owner routing knows (those filed elsewhere, the other checkouts)."""
    if not _CHECKOUTS:
        _CHECKOUTS.append(frozenset((*owner_packages(), *OTHER_CHECKOUTS)))
    return _CHECKOUTS[0]


_CHECKOUTS: list[frozenset[str]] = []     # cleared on every register/unregister


class TargetsStack:
    """The engine's interface (reducer/stack.py), answered from the registry as it is at each
    question, so a target registered later is known to the engine at once."""

    def checkout_packages(self) -> frozenset[str]:
        return checkout_packages()

    def config_by_type(self, owner: str) -> Spelling | None:
        return next((found for t in _REGISTRY.values() if t.config_by_type and (found := t.config_by_type(owner))),
                    None)

    def adapter_wrapper(self, config_class: str) -> Spelling | None:
        return next((found for t in _REGISTRY.values()
                     if t.adapter_wrapper and (found := t.adapter_wrapper(config_class))), None)


for _target in _builtin():
    register(_target)
# The bot's start-up: from here on the engine asks the targets (reducer/stack.py).
ENGINE_STACK = engine_stack.register(TargetsStack())


# --- TARGETS and REPO_KEYS: views read from the registry on each access, so a target registered
# --- after import (a test fixture, a plugin) is seen by every reader that holds them ------------

class _TargetsView(Mapping[str, str]):
    """key -> repo of every registered target, read from the registry on each access."""

    def __getitem__(self, key: str) -> str:
        return _REGISTRY[key].repo

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(_REGISTRY))

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return f"TARGETS({dict(self)!r})"


class _KeysView(Sequence[str]):
    """The registered keys in order; argparse ``choices=`` reads it at parse time, so a target
    registered after the parser was built is still accepted."""

    def __getitem__(self, i: Any) -> Any:
        return repo_keys()[i]

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __contains__(self, key: object) -> bool:
        return key in _REGISTRY

    def __repr__(self) -> str:
        return repr(repo_keys())


TARGETS: Mapping[str, str] = _TargetsView()
REPO_KEYS: Sequence[str] = _KeysView()


def recipe_files() -> tuple[Path, ...]:
    """Every target's value recipes (reducer/analysis/recipes.py), most specific first: a wrapper's (peft)
    before what it wraps (transformers), the foundation (torch) last but for its own types."""
    here = Path(__file__).parent / "recipes"
    ordered = sorted(targets(), key=lambda t: (t.foundation, -t.order))
    return tuple(here / t.recipes for t in ordered if t.recipes and (here / t.recipes).is_file())

