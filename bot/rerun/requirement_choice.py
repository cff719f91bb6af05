"""Which release of an unmet requirement an overlay installs beside a swapped release.

A row of `versions` runs a release of the package under test that may declare requirements the
user's environment (the base) does not meet. The row should run that release in the environment
closest to the user's that satisfies it:

1. a base package that satisfies the requirement is kept (it is never unmet);
2. otherwise the release of the requirement *contemporary* with the row: the newest release that
   satisfies every specifier declared for it and was uploaded no later than the row's newest
   pinned release (the *anchor*: the swapped release, or the newest of the lock's pins);
3. no upload times (a ``--find-links`` folder, ``--no-index``, an index without PEP 691/700
   times, or no release dated before the anchor): the satisfying release nearest the base's own in
   version order (the smallest above it; the largest below it when the specifier caps it), or
   the smallest satisfying release when the base does not have the package;
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
"""
from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import (InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename,
                             parse_wheel_filename)
from packaging.version import InvalidVersion, Version

from bot.rerun.releases import IndexOptions, Releases, list_releases

PYPI_SIMPLE = "https://pypi.org/simple"
_JSON = "application/vnd.pypi.simple.v1+json"
INDEX_TIMEOUT = 30.0

CONTEMPORARY = "contemporary"          # newest satisfying release uploaded no later than the anchor
NEAREST = "nearest"                    # no upload times: the satisfying release nearest the base's
SMALLEST = "smallest"                  # no upload times, not in the base: the smallest satisfying
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
               SMALLEST: "no upload times: smallest satisfying", NEWEST: "newest matching"}[self.how]
        return f"{self.name} {version} ({how}{': ' + self.why if self.why else ''})"


# --- upload times ---------------------------------------------------------------------------------

_times: dict[tuple[str, str], dict[str, _dt.datetime]] = {}
_configured_url: list[str | None] = []
_unreachable: set[str] = set()          # indexes that did not answer once: not asked again (offline)


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


def _version_of(filename: str) -> str | None:
    try:
        if filename.endswith(".whl"):
            return str(parse_wheel_filename(filename)[1])
        return str(parse_sdist_filename(filename)[1])
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def _parse_time(text: str) -> _dt.datetime | None:
    try:
        t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def upload_times(name: str, index: IndexOptions, timeout: float = INDEX_TIMEOUT) -> dict[str, _dt.datetime]:
    """Release -> its first file's upload time, from the index's PEP 691 JSON page (PEP 700's
    ``upload-time``); empty when the index gives none (--no-index, an HTML-only index, no answer)."""
    url = index_url(index)
    if url is None:
        return {}
    key = (url, canonicalize_name(name))
    if url in _unreachable:
        return {}
    if key not in _times:
        _times[key] = _fetch_times(url, url.rstrip("/") + f"/{canonicalize_name(name)}/", timeout)
    return _times[key]


def _fetch_times(url: str, page: str, timeout: float) -> dict[str, _dt.datetime]:
    request = urllib.request.Request(page, headers={"Accept": _JSON})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            if _JSON not in (resp.headers.get("Content-Type") or ""):
                return {}
            data = json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError:
        return {}                       # the index answered: no such project there
    except OSError:
        _unreachable.add(url)
        return {}
    except ValueError:
        return {}
    out: dict[str, _dt.datetime] = {}
    for f in data.get("files") or []:
        if not isinstance(f, dict) or f.get("yanked"):
            continue
        version = _version_of(str(f.get("filename") or ""))
        when = _parse_time(str(f.get("upload-time") or ""))
        if version and when and (version not in out or when < out[version]):
            out[version] = when
    return out


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
        return Choice(name, spec, fits[0], SMALLEST)
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
