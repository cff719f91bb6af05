"""The pins a repro failed with, read from its requirements.lock (pip-tools format)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from bot.targets import git_repos, versions_packages
from reducer.errors import ExitCode, ReprobotError


def versions_stack() -> tuple[str, ...]:
    """The packages `versions` swaps by default, in the order a maintainer reads them: every
    registered target's that may be swapped (bot/targets/)."""
    return versions_packages()


@dataclass
class Lock:
    pins: dict[str, str]                       # canonical name -> exact version
    names: dict[str, str] = field(default_factory=dict)   # canonical name -> name as written
    index_options: list[str] = field(default_factory=list)  # --index-url / --extra-index-url / --find-links

    def version(self, name: str) -> str | None:
        return self.pins.get(canonicalize_name(name))

    def has(self, name: str) -> bool:
        return canonicalize_name(name) in self.pins


_OPTION = re.compile(r"^\s*(--(?:index-url|extra-index-url|find-links|trusted-host)|-[if])[\s=]+(\S+)")


def parse_lock(text: str) -> Lock:
    """`name==version` lines (hashes, markers and comments allowed; continuation lines joined)."""
    lock = Lock({})
    joined = re.sub(r"\\\n", " ", text)
    for raw in joined.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        opt = _OPTION.match(line)
        if opt:
            flag = {"-i": "--index-url", "-f": "--find-links"}.get(opt.group(1), opt.group(1))
            lock.index_options += [flag, opt.group(2)]
            continue
        if line.startswith("-"):
            continue
        line = re.sub(r"\s--hash[=\s]\S+", "", line).strip()
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        pinned = [s.version for s in req.specifier if s.operator in ("==", "===")]
        if pinned:
            key = canonicalize_name(req.name)
            lock.pins[key] = pinned[0]
            lock.names[key] = req.name
    return lock


def read_lock(path: Path) -> Lock:
    if not path.is_file():
        raise ReprobotError(f"{path.parent}: no requirements.lock; run `reprobot env {path.parent}` first",
                            ExitCode.BAD_INPUT)
    lock = parse_lock(path.read_text(encoding="utf-8"))
    if not lock.pins:
        raise ReprobotError(f"{path}: no pinned packages in it", ExitCode.BAD_INPUT)
    return lock


def github_repos() -> dict[str, str]:
    """Where `--git PACKAGE@REF` installs from: package -> its target's GitHub repository."""
    return git_repos()
