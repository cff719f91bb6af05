"""`versions` swaps in a release whose requirements the user's base does not meet: the overlay
installs each unmet requirement at the release closest to the user's environment that satisfies it
(bot/rerun/requirement_choice.py), never simply the newest, which the swapped release may never
have run with. Real pip, fake wheels: a local --find-links folder (no upload times) and a local
PEP 691 index on 127.0.0.1 that gives upload times."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from bot.cli import main
from bot.rerun.requirement_choice import CONTEMPORARY, NEAREST, NEWEST, SERIES, choose
from tests.test_rerun import base_venv, build_wheel, make_repro

# rbfake_pkga 2.0 fixes compute() and needs rbfake_dep>=1.1, which needs rbfake_sub>=2. The base has
# pkga 1.0, dep 1.0 and sub 1.0. dep 3.0 and sub 9.0, uploaded after pkga 2.0, break on import:
# the newest matching release of either makes pkga 2.0's row a "different failure".
WORKS = "def double(x):\n    return 2 * x\n"
BREAKS = 'raise ImportError("this release removed double()")\n'
UPLOADS = [  # name, version, body, requires, upload month of 2024 (0: 2023)
    ("rbfake_pkga", "1.0", 'def compute(x):\n    raise ValueError(f"bad input: {x}")\n', (), 0),
    ("rbfake_dep", "1.0", WORKS, (), 0),
    ("rbfake_sub", "1.0", WORKS, (), 0),
    ("rbfake_sub", "2.0", WORKS, (), 1),
    ("rbfake_dep", "1.1", "import rbfake_sub\n" + WORKS, ("rbfake_sub>=2",), 2),
    ("rbfake_sub", "2.5", WORKS, (), 3),
    ("rbfake_dep", "1.2", "import rbfake_sub\n" + WORKS, ("rbfake_sub>=2",), 4),
    ("rbfake_pkga", "2.0", "import rbfake_dep\ndef compute(x):\n    return rbfake_dep.double(x)\n",
     ("rbfake_dep>=1.1",), 5),
    ("rbfake_dep", "3.0", BREAKS, (), 6),
    ("rbfake_sub", "9.0", BREAKS, (), 7),
]


def _uploaded(month: int) -> str:
    return "2023-06-01T00:00:00Z" if month == 0 else f"2024-{month:02d}-01T00:00:00Z"


class _Index(BaseHTTPRequestHandler):
    """PEP 691 JSON pages with PEP 700 upload times, and the wheels themselves."""
    wheels: Path
    times: dict[str, str]

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if len(parts) == 2 and parts[0] == "simple":
            project = parts[1].replace("-", "_")
            files = [{"filename": w.name, "url": f"/files/{w.name}", "upload-time": self.times[w.name],
                      "hashes": {"sha256": hashlib.sha256(w.read_bytes()).hexdigest()}}
                     for w in sorted(self.wheels.glob(f"{project}-*.whl"))]
            if not files:
                return self._send(404, b"", "text/plain")
            body = json.dumps({"meta": {"api-version": "1.1"}, "name": parts[1], "files": files}).encode()
            return self._send(200, body, "application/vnd.pypi.simple.v1+json")
        if len(parts) == 2 and parts[0] == "files" and (self.wheels / parts[1]).is_file():
            return self._send(200, (self.wheels / parts[1]).read_bytes(), "application/octet-stream")
        self._send(404, b"", "text/plain")

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("overlay")
    wheels = root / "wheels"
    wheels.mkdir()
    times = {}
    for name, version, body, requires, month in UPLOADS:
        times[build_wheel(wheels, name, version, body, requires).name] = _uploaded(month)
    python = base_venv(root / "base", wheels, "rbfake_pkga==1.0", "rbfake_dep==1.0", "rbfake_sub==1.0")
    folder = make_repro(root, python, "import rbfake_pkga\nrbfake_pkga.compute(3)\n",
                        "rbfake_pkga==1.0\nrbfake_dep==1.0\nrbfake_sub==1.0\n", "overlay")
    handler = type("Index", (_Index,), {"wheels": wheels, "times": times})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, wheels, python, f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()


@pytest.fixture
def env_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOT_ENV_CACHE", str(tmp_path / "envs"))
    return tmp_path / "envs"


def _row(folder: Path, python: Path, *index: str) -> dict:
    assert main(["versions", str(folder), "--python", str(python), "--package", "rbfake_pkga",
                 "--range", "2.0..2.0", *index, "--json"]) == 0
    (row,) = json.loads((folder / "versions.json").read_text())["rows"]
    return row


def test_offline_the_row_gets_the_release_nearest_the_users_and_says_there_were_no_times(world, env_cache):
    folder, wheels, python, _ = world
    row = _row(folder, python, "--no-index", "--find-links", str(wheels))
    assert row["verdict"]["kind"] == "PASS", row
    # dep 1.1 is the smallest above the base's 1.0; its own requirement, sub, the smallest above 1.0
    assert row["also"] == {"rbfake-dep": "1.1", "rbfake-sub": "2.0"}
    assert "no upload times" in row["note"] and "rbfake-dep 1.1" in row["note"]

    # An overlay cached before requirements were chosen (it added the newest) is built again;
    # one that added nothing is reused as it is.
    from bot.rerun.environments import CHOSEN, reusable
    (env_dir,) = [p for p in env_cache.iterdir() if (p / CHOSEN).is_file()]
    assert reusable(env_dir, {"rbfake-pkga": "2.0"})
    (env_dir / CHOSEN).unlink()
    assert not reusable(env_dir, {"rbfake-pkga": "2.0"})
    (env_dir / ".reprobot-complete").write_text(json.dumps({"rbfake-pkga": "2.0"}))
    assert reusable(env_dir, {"rbfake-pkga": "2.0"})


def test_with_upload_times_the_row_gets_the_releases_contemporary_with_the_swapped_one(world, env_cache):
    folder, _, python, url = world
    row = _row(folder, python, "--index-url", url)
    assert row["verdict"]["kind"] == "PASS", row
    # the newest uploaded no later than pkga 2.0 (May): dep 1.2 (April), and for it sub 2.5 (March)
    assert row["also"] == {"rbfake-dep": "1.2", "rbfake-sub": "2.5"}
    assert "rbfake-dep 1.2 (contemporary)" in row["note"]


def test_offline_a_wheel_folder_with_upload_times_gets_the_contemporary_releases(world, env_cache, tmp_path):
    """A wheel cache read offline (--no-index --find-links) carries the times its files were
    uploaded, written where it was filled from an index: the row then gets what it gets online."""
    from bot.rerun.release_times import SIDECAR, record_from_index
    folder, wheels, python, url = world
    cache = tmp_path / "cache"
    shutil.copytree(wheels, cache)
    # written from the index for the projects named, for the files the folder holds
    assert record_from_index(cache, ["rbfake_pkga", "rbfake_dep", "rbfake_sub"], url) == len(UPLOADS)
    assert record_from_index(cache, ["rbfake_dep"], url) == 0           # nothing new to ask for
    recorded = json.loads((cache / SIDECAR).read_text())["releases"]
    assert recorded["rbfake-dep"]["1.2"].startswith("2024-04-01T00:00:00")
    row = _row(folder, python, "--no-index", "--find-links", str(cache))
    assert row["verdict"]["kind"] == "PASS", row
    assert row["also"] == {"rbfake-dep": "1.2", "rbfake-sub": "2.5"}
    assert "rbfake-dep 1.2 (contemporary)" in row["note"]


def test_the_choice_rules():
    versions = ["1.0", "1.1", "1.2", "2.0", "3.0"]
    at = {v: dt.datetime(2024, i + 1, 1, tzinfo=dt.timezone.utc) for i, v in enumerate(versions)}
    anchor = dt.datetime(2024, 3, 15, tzinfo=dt.timezone.utc)
    assert choose("d", SpecifierSet(">=1.1"), "1.0", versions, at, anchor).version == "1.2"
    assert choose("d", SpecifierSet(">=1.1"), "1.0", versions, at, anchor).how == CONTEMPORARY
    # nothing satisfying was uploaded before the anchor: no times to go by
    late = choose("d", SpecifierSet(">=2"), "1.0", versions, at, anchor)
    assert (late.version, late.how) == ("2.0", NEAREST)
    # a cap below the base's release: the largest under it
    assert choose("d", SpecifierSet("<2"), "3.0", versions, {}, None).version == "1.2"
    # a package the base lacks: the newest of the lowest satisfying series, not the smallest (whose
    # own requirements are as old as it), nor a later major nothing declared
    lacks = choose("d", SpecifierSet(">=1.1"), None, versions, {}, None)
    assert (lacks.version, lacks.how) == ("1.2", SERIES)
    assert "newest of the lowest satisfying series" in lacks.words()
    httpx = ["0.22.0", "0.23.0", "0.23.3", "0.27.2", "0.28.1", "1.0.0"]
    assert choose("httpx", SpecifierSet(">=0.23.0"), None, httpx, {}, None).version == "0.28.1"
    assert choose("httpx", SpecifierSet(">=1.0.0"), None, httpx, {}, None).version == "1.0.0"
    assert choose("d", SpecifierSet(">=9"), "1.0", versions, at, anchor).how == NEWEST
