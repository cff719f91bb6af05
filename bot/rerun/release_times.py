"""When each release of a package was uploaded: from an index, or from a wheel folder's sidecar.

An index that speaks PEP 691 JSON gives each file's PEP 700 ``upload-time``. A ``--find-links``
folder (a wheel cache filled once, then read offline) has no index to ask, so it can carry the
times itself: ``upload-times.json`` beside the wheels, ``{"releases": {"<project>": {"<release>":
"<ISO time>"}}}``, written by whatever fills the folder from an index (``record_from_index``;
bench/realbugs/run.py's wheel cache does). A release's time is its first file's on the index (an
sdist may precede the wheel the folder holds), so offline reads the times online gives. pip and uv
skip a file there that is not a distribution.
"""
from __future__ import annotations

import datetime as _dt
import json
import urllib.error
import urllib.request
from pathlib import Path

from packaging.utils import (InvalidSdistFilename, InvalidWheelFilename, canonicalize_name, parse_sdist_filename,
                             parse_wheel_filename)
from packaging.version import InvalidVersion

from bot.store import write_json_atomic

SIDECAR = "upload-times.json"
_JSON = "application/vnd.pypi.simple.v1+json"
INDEX_TIMEOUT = 30.0

Times = dict[str, _dt.datetime]          # file name (or release) -> upload time

_pages: dict[tuple[str, str], Times] = {}
_unreachable: set[str] = set()           # indexes that did not answer once: not asked again (offline)


def _project_version(filename: str) -> tuple[str, str] | None:
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return canonicalize_name(name), str(version)


def parse_time(text: str) -> _dt.datetime | None:
    try:
        t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def by_release(files: Times, name: str) -> Times:
    """Release -> the upload time of its first file, from file times (files of other projects skipped)."""
    key = canonicalize_name(name)
    out: Times = {}
    for filename, when in files.items():
        pv = _project_version(filename)
        if pv and pv[0] == key and (pv[1] not in out or when < out[pv[1]]):
            out[pv[1]] = when
    return out


def index_files(url: str, name: str, timeout: float = INDEX_TIMEOUT) -> Times:
    """File -> upload time from the index's PEP 691 page for `name`; empty when it gives none (an
    HTML-only index, no such project, no answer)."""
    if url in _unreachable:
        return {}
    key = (url, canonicalize_name(name))
    if key not in _pages:
        _pages[key] = _fetch(url, url.rstrip("/") + f"/{canonicalize_name(name)}/", timeout)
    return _pages[key]


def _fetch(url: str, page: str, timeout: float) -> Times:
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
    out: Times = {}
    for f in data.get("files") or []:
        if not isinstance(f, dict) or f.get("yanked"):
            continue
        when = parse_time(str(f.get("upload-time") or ""))
        filename = str(f.get("filename") or "")
        if when and _project_version(filename):
            out[filename] = when
    return out


def _held(folder: Path) -> set[tuple[str, str]]:
    """(project, release) of every distribution file the folder holds."""
    return {pv for p in folder.iterdir() if p.is_file() for pv in [_project_version(p.name)] if pv}


def _read(folder: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads((folder / SIDECAR).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    releases = data.get("releases") if isinstance(data, dict) else None
    return {str(k): {str(v): str(t) for v, t in d.items()} for k, d in releases.items() if isinstance(d, dict)} \
        if isinstance(releases, dict) else {}


def folder_times(folder: Path, name: str) -> Times:
    """Release -> upload time, from the folder's sidecar, for the releases of `name` it holds
    (empty: no sidecar, or nothing recorded for it)."""
    key = canonicalize_name(name)
    held = {v for n, v in _held(folder) if n == key}
    out: Times = {}
    for version, text in _read(folder).get(key, {}).items():
        when = parse_time(text)
        if when and version in held:
            out[version] = when
    return out


def record(folder: Path, name: str, times: Times) -> int:
    """Add to the folder's sidecar the upload times (release -> time, as the index gives them) of
    the releases of `name` it holds; returns how many were new."""
    key = canonicalize_name(name)
    data = _read(folder)
    known = data.get(key, {})
    held = {v for n, v in _held(folder) if n == key}
    new = {v: t.isoformat() for v, t in times.items() if v in held and v not in known}
    if not new:
        return 0
    data[key] = dict(sorted({**known, **new}.items()))
    # written whole and renamed: a run reading the folder never sees half a file
    write_json_atomic(folder / SIDECAR, {"releases": dict(sorted(data.items()))})
    return len(new)


def record_from_index(folder: Path, names: list[str], url: str) -> int:
    """The index's upload times of the releases of `names` the folder holds, into its sidecar (one
    page a project, asked only for a project with a release the sidecar lacks)."""
    recorded = _read(folder)
    lacking = {n for n, v in _held(folder) if v not in recorded.get(n, {})}
    added = 0
    for name in sorted({canonicalize_name(n) for n in names} & lacking):
        added += record(folder, name, by_release(index_files(url, name), name))
    return added
