"""What a reduced notebook installs, in the environment record beside what the run had (issue #43).

A notebook's ``!pip install`` / ``%pip install`` lines are recorded, never run
(reducer/failure/notebook.py: ``notebook.json``'s ``requirements``). The repro was verified on the
interpreter reduce ran, so the record keeps both apart:

- env.json's ``notebook_installs``: each requirement as the notebook wrote it, with the version the
  run had and whether it satisfies it. A requirement that is a URL, a VCS link or a local path is
  never installable from the record (the private-source rule of bot/env/lockfile.py): it is kept
  as written only for an upstream project on a public code host (bot/env/privacy.py's rule), else
  as ``name @ <private URL>`` (``<private VCS link>``, ``<local path>``); a distribution
  privacy.py hides is named as it names it. notebook.json stores them the same way;
- on screen and in the draft: the notebook's installs, and each one the run's version does not
  satisfy ("the notebook pins peft==0.13.0; the run had 0.21.2"): the repro was verified on the
  run's versions, not the notebook's;
- requirements.in keeps what the run used (the lock is what ran); the notebook's requirements
  follow as comments (see ``requirements_in_comments`` for why).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

RECORD = "notebook.json"        # bot/issue/notebook_note.py's record of the notebook
KEY = "notebook_installs"       # env.json's section
# What stands for a source a record does not name, by its kind.
_KINDS = {"<private URL>": "url", "<private VCS link>": "vcs", "<local path>": "path"}
_REDACTED = re.compile("|".join(re.escape(k) for k in _KINDS))
MAX_REQUIREMENTS = 60
_VCS = re.compile(r"^(?:git|hg|svn|bzr)\+", re.IGNORECASE)
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_ARCHIVE = re.compile(r"\.(?:whl|tar\.gz|tgz|zip|tar\.bz2)$", re.IGNORECASE)


def notebook_requirements(folder: Path) -> list[str] | None:
    """The requirements a repro folder's notebook installs, or None when it is not from a notebook."""
    path = Path(folder) / RECORD
    if not path.is_file() or path.is_symlink():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        reqs = data["requirements"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [str(r) for r in reqs if isinstance(r, str) and r.strip()][:MAX_REQUIREMENTS] if isinstance(reqs, list) else None


def _source(text: str) -> str | None:
    """"vcs", "url" or "path" for a requirement that is not a name from an index; None for one that is."""
    if _VCS.match(text):
        return "vcs"
    if text.lower().startswith("file:"):
        return "path"
    if _URL.match(text):
        return "url"
    if text.startswith((".", "/", "~", "\\")) or "/" in text or "\\" in text or _ARCHIVE.search(text):
        return "path"
    return None


def classify(text: str) -> tuple[Requirement | None, str | None]:
    """The requirement (None when it is not PEP 508) and where it installs from (None: an index)."""
    text = text.strip()
    shown = _REDACTED.search(text)
    if shown:       # already written by ``shown_requirement`` (notebook.json)
        return None, _KINDS[shown.group(0)]
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None, _source(text)
    if req.url:
        return req, _source(req.url) or "url"
    if _source(text) is not None:      # a wheel's file name parses as a name too
        return None, _source(text)
    return req, None


def shown_requirement(text: str) -> str:
    """``text`` as a record may show it: a URL, VCS link or path is kept only for an upstream
    project on a public code host (bot/env/privacy.py's rule), else replaced by what it is."""
    from bot.env.privacy import _public_source
    text = text.strip()
    req, source = classify(text)
    if source is None or _REDACTED.search(text):
        return text
    url = req.url if req is not None and req.url else text
    if source in ("vcs", "url") and _public_source(url):
        return text
    placeholder = next(k for k, v in _KINDS.items() if v == source)
    return f"{req.name} @ {placeholder}" if req is not None else placeholder


def installs_section(requirements: Iterable[str], raw: dict, known: Iterable[str]) -> dict[str, Any]:
    """env.json's ``notebook_installs`` for ``requirements`` (as the notebook wrote them), against
    the probe's ``raw`` record of the run's interpreter; ``known``: the names privacy.py keeps."""
    from bot.env.privacy import PRIVATE_PACKAGE, private_distribution
    dists = [d for d in ((raw.get("distributions") or {}).get("distributions") or []) if isinstance(d, dict)]
    installed = {canonicalize_name(str(d.get("name"))): str(d.get("version")) for d in dists}
    known = tuple(known)
    # numbered as privacy.private_env numbers them, so the two sections name one package alike
    private = sorted({str(d.get("name")) for d in dists if private_distribution(d, known)},
                     key=lambda n: canonicalize_name(n))
    labels = {canonicalize_name(n): f"{PRIVATE_PACKAGE} #{i}" for i, n in enumerate(private, 1)}
    out = []
    for text in requirements:
        text = text.strip()
        req, source = classify(text)
        name = canonicalize_name(req.name) if req is not None else None
        entry: dict[str, Any] = {"requirement": shown_requirement(text), "installable": req is not None and source is None}
        if source is not None:
            entry["source"] = source
        if name in labels:
            entry["requirement"] = labels[name]     # privacy.py does not name it: neither does this
            entry["installable"] = False
        have = installed.get(name) if name else None
        entry["run_version"] = have if name not in labels else (have or "").split("+", 1)[0] or None
        entry["satisfied"] = _satisfied(req, have) if source is None else None
        out.append(entry)
    return {"requirements": out, "unsatisfied": [e["requirement"] for e in out if e["satisfied"] is False]}


def _satisfied(req: Requirement | None, have: str | None) -> bool | None:
    """Whether the run's version meets the notebook's requirement; None when it cannot be told."""
    if req is None:
        return None
    if have is None:
        return False
    if not req.specifier:
        return True
    try:
        return req.specifier.contains(Version(have), prereleases=True)
    except InvalidVersion:
        return None


def mismatches(env: dict | None) -> list[str]:
    """One phrase per notebook requirement the run's version does not satisfy."""
    section = (env or {}).get(KEY) if isinstance(env, dict) else None
    out = []
    for e in (section or {}).get("requirements") or []:
        if isinstance(e, dict) and e.get("satisfied") is False:
            have = e.get("run_version")
            out.append(f"{e.get('requirement')} (the run had {have})" if have else
                       f"{e.get('requirement')} (not installed in the run)")
    return out


def installs(env: dict | None) -> list[str]:
    section = (env or {}).get(KEY) if isinstance(env, dict) else None
    return [str(e.get("requirement")) for e in (section or {}).get("requirements") or [] if isinstance(e, dict)]


def system_info_lines(env: dict | None) -> str:
    """What System Info adds for a notebook: its installs, and which the run's versions miss."""
    names = installs(env)
    if not names:
        return ""
    lines = [f"- The notebook installs (recorded from its `!pip`/`%pip` lines, not run): {' '.join(names)}"]
    missed = mismatches(env)
    if missed:
        lines.append(f"- Verified on the run's versions, not the notebook's: {'; '.join(missed)}")
    return "\n".join(lines)


def screen_line(env: dict | None) -> str | None:
    missed = mismatches(env)
    if not missed:
        return None
    return ("the notebook installs what this run did not have: " + "; ".join(missed)
            + " — the repro was verified on the run's versions, not the notebook's")


def requirements_in_comments(folder: Path, env_dists: dict[str, Any], known: Iterable[str] = ()) -> list[str]:
    """requirements.in's closing comment lines for a notebook's installs (none for a script).

    Comments, not requirements: requirements.in is the input of what ran (the lock pins its
    closure), and a maintainer who installs it must get the versions the repro failed on. The
    notebook's own lines sit below it because the next thing they try is "does it fail on the
    versions the user meant?": the line to change is there, and nothing installs it by accident.
    A URL, VCS link or path is named as in env.json, never as something pip could install.
    """
    reqs = notebook_requirements(folder)
    if not reqs:
        return []
    env_path = Path(folder) / "env.json"
    section = None
    try:
        section = json.loads(env_path.read_text(encoding="utf-8")).get(KEY) if env_path.is_file() else None
    except (OSError, ValueError, AttributeError):
        section = None
    entries = (section or {}).get("requirements") if isinstance(section, dict) else None
    if not isinstance(entries, list) or not entries:
        # no env.json section (env.json not written first): the lock's own probe; ``known``: the
        # names privacy.py keeps (probe.recorded_names)
        raw = {"distributions": {"distributions": [{"name": d.name, "version": d.version, "kind": d.kind, "url": d.url}
                                                   for d in env_dists.values()]}}
        entries = installs_section(reqs, raw, known)["requirements"]
    lines = ["", "# The notebook installs these (its !pip/%pip lines, recorded, never run). Not what ran:",
             "# the pins above are. Each is a comment so that nothing installs it by accident."]
    for e in entries:
        if not isinstance(e, dict):
            continue
        note = ("not installable from here: " + str(e.get("source")) if e.get("installable") is False and e.get("source")
                else f"the run had {e['run_version']}" if e.get("satisfied") is False and e.get("run_version")
                else "not installed in the run" if e.get("satisfied") is False else "")
        lines.append(f"#   {e.get('requirement')}" + (f"  ({note})" if note else ""))
    return lines
