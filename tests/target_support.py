"""What every per-target test (tests/test_target_<key>.py) checks, through the real pieces: its
packages' frames are library frames to the engine's normaliser (installed, and in an editable
checkout), a traceback raised in its code routes to it, and its probe section (if it has one)
runs in a real interpreter and lands in env.json. CONTRIBUTING.md ("Add a target") says to write
one such file for a new target; tests/test_target_datasets.py does, for a seventh target."""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from bot.env.probe import run_probe, shape_env
from bot.targets import Target, get_target, probe_sections
from bot.upstream.failure import failure_from_text
from bot.upstream.route import RouteResult, route
from reducer.failure.normalize import library_path, package_of
from tests.test_route import tb

SHARED_FORMS = Path(__file__).resolve().parents[2] / "shared" / "upstream-forms"
REPO_FORMS = Path(__file__).resolve().parent / "data" / "upstream-forms"


def assert_frames_are_library_frames(target: Target) -> None:
    """Each of its import names, installed or run from an editable checkout, is library code:
    the engine's normaliser cuts the path at the package, as signatures and routing read it."""
    for pkg in target.packages:
        for path in (f"/home/u/venv/lib/python3.11/site-packages/{pkg}/core/run.py",
                     f"C:\\Users\\u\\venv\\Lib\\site-packages\\{pkg}\\core\\run.py",
                     f"/home/u/code/{pkg}/src/{pkg}/core/run.py"):
            assert library_path(path) == f"{pkg}/core/run.py", path
            assert package_of(path) == pkg, path
    # The user's own checkout of a package that is no one's stays the user's code.
    assert library_path("/home/u/myproj/src/myproj/train.py") is None


def routed(frames: list[str], error: str, call: str = "main()") -> RouteResult:
    """Where a traceback through ``frames`` (``"pkg/mod.py:func"``, outermost first) goes."""
    return route(failure_from_text(tb(frames, error, call)))


def probe_section(name: str, pythonpath: Path | None = None, monkeypatch=None) -> dict:
    """The probe's ``packages`` section and a target's own section ``name``, run by this
    interpreter as the probe runs them in a user's (its source written next to the script), and
    shaped into env.json."""
    assert name in {s.name for s in probe_sections()}, f"no target declares the probe section {name!r}"
    if pythonpath is not None and monkeypatch is not None:
        monkeypatch.setenv("PYTHONPATH", str(pythonpath))
    raw = run_probe(sys.executable, sections=["packages", name], timeout=120)
    return shape_env(raw)


def fake_distribution(site: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A package ``name`` with installed metadata (what ``_installed`` and the packages section
    read), made of ``files`` (path inside the package -> text), under ``site``."""
    for rel, text in files.items():
        path = site / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    return site


def form_copy(key: str, folder: Path | None = None) -> Path | None:
    """The copy of its upstream bug-report form: inside the repo (tests/data/upstream-forms/<key>/,
    or ``folder``), else the shared copy the first targets were written from."""
    for root in ([folder] if folder else []) + [REPO_FORMS, SHARED_FORMS]:
        path = root / key / get_target(key).form_file
        if path.is_file():
            return path
    return None


def assert_fields_follow_the_form(target: Target, form: Path) -> None:
    """Its declared fields are the form's textareas and checkboxes, same ids, labels and required
    flags, in the form's order (a field the form gives no id keeps a reprobot-side one)."""
    body = [e for e in yaml.safe_load(form.read_text(encoding="utf-8"))["body"]
            if e.get("type") in ("textarea", "checkboxes")]
    assert [f.label for f in target.fields] == [e["attributes"]["label"] for e in body]
    for f, e in zip(target.fields, body):
        assert f.type == e["type"] and (f.id == e.get("id") or not f.prefill), (f.id, e.get("id"))
        assert f.required == bool((e.get("validations") or {}).get("required")), f.id
