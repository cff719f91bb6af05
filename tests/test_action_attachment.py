"""The Action runs an attached notebook or test file when the post has no code block (issue #43).

The attachment links point at a real local HTTP server standing in for github.com (its
``/user-attachments/files/<id>/<name>`` links answer with a redirect, as GitHub's do) and a
second one for GitHub's storage; ``$REPROBOT_ATTACHMENT_WEB`` / ``_STORAGE`` point the job at
them, as ``$REPROBOT_GITHUB_API`` points the API client at tests/fakegithub.py. The runs that
reduce go through the real sandbox (bot/action/sandbox.py), like a code block's.
"""
from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bot.action.attachment import AttachmentError, Hosts, fetch, runnable_links
from bot.action.event import load_event
from bot.action.render import load_reply, render_reply
from bot.action.reproduce import ReproduceOptions, reproduce
from tests.sandbox_support import assert_ran_isolated, needs_userns

EVENTS = Path(__file__).parent / "data" / "events"

# A notebook whose third code cell fails; its first has a notebook install and a timing magic.
NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# config lookup\n"]},
        {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
         "source": ["!pip install packaging>=20\n", "import json\n"]},
        {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [],
         "source": ["%%time\n", "def settings():\n", "    return json.loads('{\"lr\": 3, \"rank\": 8}')\n",
                    "cfg = settings()\n"]},
        {"cell_type": "code", "execution_count": 3, "metadata": {}, "outputs": [],
         "source": ["print(cfg['lr'])\n", "print(cfg['alpha'])\n"]},
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}
TEST_FILE = ("import json\n\n\ndef load():\n    return json.loads('{\"a\": 1}')\n\n\n"
             "def test_keys_present():\n    assert load()['a'] == 1\n\n\n"
             "def test_missing_key():\n    cfg = load()\n    assert cfg['b'] == 2\n")


class _Handler(BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    redirects: dict[str, str] = {}
    seen: list[tuple[str, dict[str, str]]] = []

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        type(self).seen.append((self.path, dict(self.headers)))
        if self.path in self.redirects:
            self.send_response(302)
            self.send_header("Location", self.redirects[self.path])
            self.end_headers()
        elif self.path in self.files:
            data = self.files[self.path]
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args) -> None:  # quiet
        pass


class Servers:
    """github.com's attachment links on one origin, its storage on another."""

    def __init__(self) -> None:
        handler = type("H", (_Handler,), {"files": {}, "redirects": {}, "seen": []})
        self.handler = handler
        self.web = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.storage = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.other = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        for s in (self.web, self.storage, self.other):
            threading.Thread(target=s.serve_forever, daemon=True).start()

    def url(self, server: ThreadingHTTPServer) -> str:
        return f"http://127.0.0.1:{server.server_address[1]}"

    @property
    def hosts(self) -> Hosts:
        return Hosts(self.url(self.web), (self.url(self.storage),))

    @property
    def environ(self) -> dict[str, str]:
        return {"REPROBOT_ATTACHMENT_WEB": self.url(self.web), "REPROBOT_ATTACHMENT_STORAGE": self.url(self.storage)}

    def attach(self, number: int, name: str, data: bytes, *, to: ThreadingHTTPServer | None = None) -> str:
        """An attachment link that redirects to ``to`` (the storage by default), which serves ``data``."""
        path = f"/user-attachments/files/{number}/{name}"
        stored = f"/github-production-user-asset/{number}/{name}?sig=abc"
        self.handler.redirects[path] = self.url(to or self.storage) + stored
        self.handler.files[stored] = data
        return self.url(self.web) + path

    def close(self) -> None:
        for s in (self.web, self.storage, self.other):
            s.shutdown()
            s.server_close()


@pytest.fixture
def servers():
    s = Servers()
    yield s
    s.close()


def _event(tmp_path: Path, body: str):
    data = json.loads((EVENTS / "labeled_attachment.json").read_text())
    data["discussion"]["body"] = body
    path = tmp_path / "event.json"
    path.write_text(json.dumps(data))
    return load_event(path)


def _run(tmp_path: Path, servers: Servers, body: str, **kw):
    out = tmp_path / "artifact"
    opts = ReproduceOptions(out=out, scratch_root=tmp_path / "scratch", offline=True, runs=1, max_time=60,
                            timeout=60, **kw)
    result = reproduce(_event(tmp_path, body), opts,
                       environ={**os.environ, **servers.environ, "REPROBOT_GATE_ALLOWED": "true"})
    reply = render_reply(load_reply(out, "D_kwDOfake0000001", result))
    return result, out, reply


# --- which links count ------------------------------------------------------------------------

def test_only_visible_links_to_a_notebook_or_a_test_file_count() -> None:
    body = ("<!-- [old.ipynb](https://github.com/user-attachments/files/1/old.ipynb) -->\n"
            "<details><summary>more</summary>\n\n[t](https://github.com/user-attachments/files/2/test_hidden.py)\n"
            "\n</details>\n\n"
            "Not a link: `https://github.com/user-attachments/files/3/in_code.ipynb`\n\n"
            "```\nhttps://github.com/user-attachments/files/4/in_block.ipynb\n```\n\n"
            "[train.py](https://github.com/user-attachments/files/5/train.py) "
            "[data.zip](https://github.com/user-attachments/files/6/data.zip)\n\n"
            "Here: [my nb](https://github.com/user-attachments/files/7/lora%5Fexplore.ipynb) and "
            "https://github.com/octo/widgets/files/8/heads_test.py\n")
    links = runnable_links(body)
    assert [(link.name, link.kind) for link in links] == [("lora_explore.ipynb", "notebook"),
                                                         ("heads_test.py", "test")]
    assert links[0].line == 16


# --- the download -----------------------------------------------------------------------------

def test_fetch_follows_github_redirects_to_its_storage_only(servers: Servers) -> None:
    url = servers.attach(11, "lora.ipynb", b'{"cells": []}')
    link = runnable_links(f"[lora.ipynb]({url})")[0]
    assert fetch(link, servers.hosts) == '{"cells": []}'
    # No credential of any kind went out with the request.
    assert all("Authorization" not in headers and "Cookie" not in headers for _, headers in servers.handler.seen)

    # A redirect anywhere else is not followed.
    url = servers.attach(12, "away.ipynb", b"{}", to=servers.other)
    with pytest.raises(AttachmentError, match="redirected to 127.0.0.1, not its own storage"):
        fetch(runnable_links(f"[a]({url})")[0], Hosts(servers.url(servers.web), (servers.url(servers.storage),)))
    assert not any(p.startswith("/github-production-user-asset/12/") for p, _ in servers.handler.seen)

    # A link on another host, or another path on GitHub, is not an attachment.
    for url in ("https://example.com/files/1/test_x.py", servers.url(servers.other) + "/user-attachments/files/1/a.ipynb",
                servers.url(servers.web) + "/octo/widgets/blob/main/test_x.py"):
        with pytest.raises(AttachmentError, match="not a GitHub attachment"):
            fetch(runnable_links(url)[0], servers.hosts)


def test_fetch_refuses_what_is_too_large_missing_or_not_text(servers: Servers) -> None:
    big = servers.attach(21, "big.ipynb", b"x" * 5000)
    with pytest.raises(AttachmentError, match=r"big.ipynb is 5,000 bytes; the limit is 4,096"):
        fetch(runnable_links(big)[0], servers.hosts, max_bytes=4096)
    with pytest.raises(AttachmentError, match=r"HTTP 404"):
        fetch(runnable_links(servers.url(servers.web) + "/user-attachments/files/22/gone.ipynb")[0], servers.hosts)
    binary = servers.attach(23, "test_bin.py", b"\xff\xfe\x00")
    with pytest.raises(AttachmentError, match="not UTF-8 text"):
        fetch(runnable_links(binary)[0], servers.hosts)
    # The default hosts are GitHub's, over https.
    assert Hosts.from_env({}).web == "https://github.com"
    assert all(s.startswith("https://") for s in Hosts.from_env({}).storage)


# --- the job ----------------------------------------------------------------------------------

def test_a_refused_attachment_is_one_line_in_the_reply(tmp_path: Path, servers: Servers) -> None:
    body = "It fails in my notebook: [lora.ipynb](https://files.example.com/user-attachments/files/1/lora.ipynb)\n"
    result, _, reply = _run(tmp_path, servers, body, isolation="none")
    assert result.status == "attachment-error" and "linked from files.example.com" in result.detail
    assert "did not run the attached file: lora.ipynb is linked from files.example.com" in reply
    assert "Traceback" not in reply
    # A .py that is not a test module is still asked for as a code block.
    body = f"[train.py]({servers.attach(2, 'train.py', b'raise KeyError(1)')})\n"
    result, _, reply = _run(tmp_path, servers, body, isolation="none")
    assert result.status == "attachment-only" and "runs an attached notebook" in reply


@pytest.mark.slow
@needs_userns
def test_an_attached_notebook_is_reduced_in_the_sandbox(tmp_path: Path, servers: Servers) -> None:
    url = servers.attach(31, "config_lookup.ipynb", json.dumps(NOTEBOOK).encode())
    result, out, reply = _run(tmp_path, servers, f"My notebook fails: [config_lookup.ipynb]({url})\n")
    assert_ran_isolated(result)
    assert result.status == "reduced", (result.status, result.detail)
    assert result.attachment == "config_lookup.ipynb"
    record = json.loads((out / "repro" / "notebook.json").read_text())
    assert record["failing_cell"]["cell"] == 3 and record["requirements"] == ["packaging>=20"]
    assert "KeyError" in (out / "repro" / "repro.py").read_text() or "alpha" in (out / "repro" / "repro.py").read_text()
    assert "The script is the attached file `config_lookup.ipynb`" in reply


@pytest.mark.slow
@needs_userns
def test_an_attached_test_file_runs_its_failing_test(tmp_path: Path, servers: Servers) -> None:
    url = servers.attach(41, "test_config.py", TEST_FILE.encode())
    result, out, reply = _run(tmp_path, servers, f"The test fails: {url}\n")
    assert_ran_isolated(result)
    assert result.status == "reduced", (result.status, result.detail)
    assert json.loads((out / "repro" / "pytest.json").read_text())
    assert "cfg['b']" in (out / "repro" / "repro.py").read_text() or "'b'" in (out / "repro" / "repro.py").read_text()
    assert "The script is the attached file `test_config.py`" in reply
