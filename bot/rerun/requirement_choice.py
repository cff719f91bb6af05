"""Which release of an unmet requirement an overlay installs beside a swapped release.

A row of `versions` runs a release of the package under test that may declare requirements the
user's environment (the base) does not meet. The row should run that release in the environment
closest to the user's that satisfies it:

1. a base package that satisfies the requirement is kept (it is never unmet);
2. otherwise the release of the requirement *contemporary* with the row: the newest release that
   satisfies every specifier declared for it and was uploaded no later than the row's newest
   pinned release (the *anchor*: the swapped release, or the newest of the lock's pins).
   Upload times come from the index's PEP 691 JSON pages (PEP 700 ``upload-time``) and, offline,
   from a ``--find-links`` folder's sidecar file (``upload-times.json``, written where the folder
   is filled from an index: bot/rerun/release_times.py);
3. no upload times (a ``--find-links`` folder without a sidecar, ``--no-index``, an index without
   PEP 691/700 times, or no release dated before the anchor): the satisfying release nearest the
   base's own in version order (the smallest above it; the largest below it when the specifier
   caps it), or, when the base does not have the package, the newest satisfying release of the
   *lowest satisfying series* (the series: the version's first number, so all of 0.x is one);
4. nothing listed, or the chosen release does not install: the installer's newest matching
   release (what every row got before), and the row's note says so.

Second-round requirements (what a newly installed requirement needs) are chosen the same way,
against the same anchor.

Why the contemporary release and not the smallest satisfying one, when upload times are known: a
release is built and tested against the requirements current when it was made, while its lower
bounds are declared and rarely run (they stay where they were until something breaks), so the
smallest satisfying release is only as good as that declaration. The anchor also keeps out what
the newest-matching choice let in: a later major release of the requirement the swapped release
never ran with (transformers 5 under a trl 0.2x release made such rows import-fail and read as
"different failure", and a bisect then named the wrong release). Along a bisect the anchor moves
with the release, so each row runs in its own release's time and the outcome changes where the
package's code changed. Without times the nearest release to the user's is the next best guess:
the least change to an environment the user's other packages were built for.

Why not the smallest satisfying release when the base lacks the package (what rule 3 took until
the real-bug benchmark's fresh part, issue #42): a lower bound is where the requirement was first
declared, often years before the swapped release, and the smallest release drags in requirements
of its own time: huggingface-hub 1.31.0 accepts httpx from 0.23.0, and httpx 0.23.0 (2022) wanted
httpcore 0.15, h11 < 0.13 and anyio 3, which the overlay's rounds could not meet, so the row was
"not installable". The newest release of the series the bound names keeps the API the
bound was declared against (a series is what its users upgrade within without changing code), and
its own requirements are recent, like the rest of the user's environment; staying in the series
keeps out what the installer's newest would let in where nothing caps it, a later major release
the swapped release never declared it runs with. (Where the specifier caps it below the next
series, this is the installer's own pick.)
"""
from __future__ import annotations

import datetime as _dt
import functools
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from bot.rerun import release_times
from bot.rerun.release_times import INDEX_TIMEOUT
from bot.rerun.releases import IndexOptions, Releases, list_releases

PYPI_SIMPLE = "https://pypi.org/simple"

CONTEMPORARY = "contemporary"          # newest satisfying release uploaded no later than the anchor
NEAREST = "nearest"                    # no upload times: the satisfying release nearest the base's
SERIES = "series"                      # no upload times, not in the base: newest of the lowest satisfying series
NEWEST = "newest"                      # the installer's own pick (nothing chosen, or it did not install)


@dataclass
class Choice:
    """One unmet requirement: the release chosen for it (None: left to the installer) and how."""
    name: str
    specifier: str
    version: str | None
    how: str
    why: str = ""                      # for NEWEST: why nothing was chosen

    def requirement(self) -> str:
        return f"{self.name}=={self.version}" if self.version else f"{self.name}{self.specifier}"

    def words(self, installed: str | None = None) -> str:
        """``dep 1.2 (contemporary)``, for the row's note."""
        version = installed or self.version or "?"
        how = {CONTEMPORARY: "contemporary", NEAREST: "no upload times: nearest to the base's",
               SERIES: "no upload times: newest of the lowest satisfying series",
               NEWEST: "newest matching"}[self.how]
        return f"{self.name} {version} ({how}{': ' + self.why if self.why else ''})"


# --- upload times ---------------------------------------------------------------------------------

_configured_url: list[str | None] = []


def index_url(index: IndexOptions) -> str | None:
    """The simple index the installer reads (None with --no-index): the row's --index-url, else pip's
    configuration (PIP_INDEX_URL, pip.conf), else PyPI."""
    args = list(index.args)
    if "--no-index" in args:
        return None
    for i, a in enumerate(args):
        if a in ("--index-url", "-i") and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--index-url="):
            return a.split("=", 1)[1]
    return _pip_configured_url() or PYPI_SIMPLE


def _pip_configured_url() -> str | None:
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    if not _configured_url:
        url = None
        try:
            out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                                 timeout=30).stdout
            m = re.search(r"^(?:global|install)\.index-url='([^']+)'", out, re.M)
            url = m.group(1) if m else None
        except (OSError, subprocess.SubprocessError):
            pass
        _configured_url.append(url)
    return _configured_url[0]


def find_links(index: IndexOptions) -> list[Path]:
    """The local folders among the row's --find-links (a URL there is an index page, not a folder)."""
    args = list(index.args)
    out = []
    for i, a in enumerate(args):
        value = args[i + 1] if a in ("--find-links", "-f") and i + 1 < len(args) else \
            a.split("=", 1)[1] if a.startswith("--find-links=") else None
        if value and "://" not in value and Path(value).is_dir():
            out.append(Path(value))
    return out


def upload_times(name: str, index: IndexOptions, timeout: float = INDEX_TIMEOUT) -> dict[str, _dt.datetime]:
    """Release -> its first file's upload time: from the index's PEP 691 JSON page (PEP 700's
    ``upload-time``), and from the sidecar of each --find-links folder (bot/rerun/release_times.py),
    which is what a wheel cache read offline (--no-index) has; empty when neither gives any."""
    url = index_url(index)
    times = release_times.by_release(release_times.index_files(url, name, timeout), name) if url else {}
    for folder in find_links(index):
        for version, when in release_times.folder_times(folder, name).items():
            if version not in times or when < times[version]:
                times[version] = when
    return times


# --- the choice -----------------------------------------------------------------------------------

def choose(name: str, specifier: SpecifierSet, have: str | None, releases: list[str],
           times: dict[str, _dt.datetime], anchor: _dt.datetime | None) -> Choice:
    """The release of `name` to install for `specifier` (rules 2-4 of the module's docstring)."""
    spec = str(specifier)
    fits = sorted(specifier.filter(releases), key=Version)
    if not fits:
        return Choice(name, spec, None, NEWEST, "no listed release satisfies it")
    if anchor is not None:
        dated = [v for v in fits if v in times and times[v] <= anchor]
        if dated:
            return Choice(name, spec, dated[-1], CONTEMPORARY)
    try:
        base = Version(have) if have else None
    except InvalidVersion:
        base = None
    if base is None:
        series = Version(fits[0]).release[0]
        return Choice(name, spec, [v for v in fits if Version(v).release[0] == series][-1], SERIES)
    above = [v for v in fits if Version(v) > base]
    return Choice(name, spec, above[0] if above else fits[-1], NEAREST)


class Chooser:
    """Chooses the releases for one overlay: its anchor is the newest upload time among its pins."""

    def __init__(self, python_version: str, index: IndexOptions, pins: dict[str, str],
                 releases: Callable[[str], Releases] | None = None) -> None:
        self.python_version, self.index, self.pins = python_version, index, pins
        self._releases = releases or (lambda n: list_releases(n, python_version, index))

    @functools.cached_property
    def anchor(self) -> _dt.datetime | None:
        dated = [upload_times(n, self.index).get(_normal(v)) for n, v in self.pins.items() if "://" not in v]
        # a VCS pin is today's code: no cap; otherwise the newest pinned release's upload time
        vcs = any("://" in v for v in self.pins.values())
        known = [t for t in dated if t is not None]
        return None if vcs or not known else max(known)

    def choose(self, unmet: list[str], have: Callable[[str], str | None]) -> list[Choice]:
        """One Choice per distinct name among `unmet` (requirement strings), its specifiers combined."""
        specs: dict[str, SpecifierSet] = {}
        for text in unmet:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            key = canonicalize_name(req.name)
            specs[key] = specs.get(key, SpecifierSet()) & req.specifier
        out = []
        anchor = self.anchor
        for name, spec in sorted(specs.items()):
            rel = self._releases(name)
            if rel.error:
                out.append(Choice(name, str(spec), None, NEWEST, "its releases could not be listed"))
                continue
            times = upload_times(name, self.index) if anchor is not None else {}
            out.append(choose(name, spec, have(name), rel.versions, times, anchor))
        return out


def _normal(version: str) -> str:
    try:
        return str(Version(version))
    except InvalidVersion:
        return version
