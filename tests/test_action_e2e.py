"""End to end, the way the workflow runs it: a recorded `discussion` labeled event →
`reprobot action gate` → `reprobot action reproduce` (no token) → artifact folder →
`reprobot action publish` against the local fake GitHub → one reply; a re-run edits it.

Each step is a real `python -m bot action ...` process with the environment its job has; the
hostile inputs are in tests/data/events/*.json (see the body of labeled_failing.json).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakegithub import FakeGitHub

REPO_ROOT = Path(__file__).resolve().parent.parent
EVENTS = Path(__file__).parent / "data" / "events"
REPO = "octo/widgets"
FAKE_TOKEN = "ghp_R3proBotFakeTok3n0123456789abcdefABC"   # printed and raised by the posted script
LEAKED = "leaked-workflow-token-value"                    # a secret wrongly left in the job's env
PWNED = [Path(f"/tmp/reprobot-pwned-{n}") for n in
         ("body", "body2", "tick", "quote", "pip", "pip2", "title", "title2")]
PROBE = "reprobot-escape-probe.txt"


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "REPROBOT_", "RUNNER_", "ACTIONS_"))}
    env["COLUMNS"] = "200"
    return env


def step(name: str, event: Path, env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**env, "GITHUB_EVENT_PATH": str(event)}
    proc = subprocess.run([sys.executable, "-m", "bot", "action", name, *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert "Traceback (most recent call last)" not in proc.stderr, proc.stderr
    return proc


class Workflow:
    """The three jobs, with the environment each one gets in .github/workflows/reprobot-discussion.yml."""

    def __init__(self, server: FakeGitHub, tmp: Path) -> None:
        self.server, self.tmp = server, tmp
        self.runner_temp = tmp / "runner_temp"
        self.runner_temp.mkdir()
        self.artifact = self.runner_temp / "reprobot-artifact"

    def event(self, name: str, node: str, body: str | None = None) -> Path:
        data = json.loads((EVENTS / name).read_text())
        data["discussion"]["node_id"] = node
        if body is not None:
            data["discussion"]["body"] = body
        # GitHub shows the post the event was written from (the gate and publish compare them).
        self.server.discussions[node].body = data["discussion"]["body"] or ""
        path = self.tmp / f"event-{name}"
        path.write_text(json.dumps(data))
        return path

    def gate(self, event: Path) -> str:
        out = self.tmp / "gate_output"
        out.write_text("")
        proc = step("gate", event, {**base_env(), "GITHUB_OUTPUT": str(out), "GITHUB_TOKEN": "test-token",
                                    "REPROBOT_GITHUB_API": self.server.url})
        assert proc.returncode == 0, proc.stderr
        return out.read_text().strip().removeprefix("allowed=")

    def reproduce(self, event: Path, allowed: str, *args: str) -> dict:
        env = {**base_env(), "GITHUB_WORKSPACE": str(REPO_ROOT), "RUNNER_TEMP": str(self.runner_temp),
               "REPROBOT_GATE_ALLOWED": allowed, "GITHUB_TOKEN": LEAKED, "HF_TOKEN": "hf_" + "x" * 34}
        proc = step("reproduce", event, env, "--out", str(self.artifact), "--offline", *args)
        assert proc.returncode == 0, proc.stderr
        return json.loads((self.artifact / "result.json").read_text())

    def publish(self, event: Path) -> subprocess.CompletedProcess:
        proc = step("publish", event, {**base_env(), "GITHUB_TOKEN": "test-token",
                                       "REPROBOT_GITHUB_API": self.server.url},
                    "--artifact", str(self.artifact))
        assert proc.returncode == 0, proc.stderr
        return proc


@pytest.fixture
def wf(tmp_path: Path):
    with FakeGitHub() as server:
        server.add_repo(REPO)
        server.set_permission(REPO, "maint", "triage")
        yield Workflow(server, tmp_path)


def our_comments(wf: Workflow, node: str) -> list[dict]:
    return [c for c in wf.server.discussions[node].comments if c["author"]["login"] == "reprobot-bot"]


@pytest.mark.slow
def test_labelled_discussion_to_one_reply_then_an_edit(wf: Workflow) -> None:
    for p in PWNED:
        p.unlink(missing_ok=True)
    node = wf.server.add_discussion(REPO, number=7, title="Crash", body="")
    event = wf.event("labeled_failing.json", node)

    assert wf.gate(event) == "true"
    result = wf.reproduce(event, "true", "--runs", "1", "--max-time", "90", "--timeout", "60", "--install-deps")
    assert result["status"] == "reduced", result
    assert result["requirements"] == ["packaging>=20"] and result["requirements_installed"] is True
    assert "$(touch" in result["rejected_requirements"]
    assert (wf.artifact / "repro" / "repro.py").is_file()

    # The shell-injection attempts in the title, the prose, the pip line: nothing ran them.
    assert [p for p in PWNED if p.exists()] == []
    # Nothing the script wrote landed in the checkout (the job's cwd and $GITHUB_WORKSPACE);
    # its scratch folder (and the probes it wrote there) is gone.
    assert not (REPO_ROOT / PROBE).exists()
    assert not any(wf.runner_temp.rglob(PROBE))
    # No credential in the artifact: neither the one the script printed nor the job's.
    artifact_text = "".join(p.read_text() for p in (wf.artifact / "repro").iterdir())
    assert FAKE_TOKEN not in artifact_text and LEAKED not in artifact_text
    # The script looked for GITHUB_TOKEN and did not find it: the child's environment is an allow-list.
    assert "gh=absent" in (wf.artifact / "repro" / "traceback.txt").read_text()

    wf.publish(event)
    mine = our_comments(wf, node)
    assert len(mine) == 1
    body = mine[0]["body"]
    assert body.startswith(f"<!-- reprobot:discussion={node} -->")
    for section in ("minimal repro", "**Signature**", "```python\n", "RuntimeError", "**Size:**", " runs"):
        assert section in body, section
    # The script's own RuntimeError belongs to no Hugging Face repository: the reply says where
    # it belongs instead of offering a draft for one of them.
    route = json.loads((wf.artifact / "repro" / "route.json").read_text())
    if route["target"] is None:
        assert "**Where to file it:**" in body and "<details><summary>Draft issue" not in body
    else:
        assert "<details><summary>Draft issue" in body and "/issues/new?template=" in body
    assert FAKE_TOKEN not in body and LEAKED not in body and "hf_xxxx" not in body
    assert "gh=absent" in body

    # A re-run (label removed and added again) edits the same reply.
    wf.publish(event)
    again = our_comments(wf, node)
    assert len(again) == 1 and again[0]["id"] == mine[0]["id"]
    mutations = [r.body["query"] for r in wf.server.requests_to("POST", r"^/graphql$")
                 if "mutation" in r.body["query"]]
    assert sum("addDiscussionComment" in q for q in mutations) == 1
    assert sum("updateDiscussionComment" in q for q in mutations) == 1


def test_sender_without_triage_access_gets_nothing_run(wf: Workflow) -> None:
    ran = Path("/tmp/reprobot-untrusted-ran")
    ran.unlink(missing_ok=True)
    node = wf.server.add_discussion(REPO, number=10, title="Run my code", body="")
    event = wf.event("labeled_by_outsider.json", node)
    allowed = wf.gate(event)
    assert allowed == "false"
    # The workflow skips reproduce and publish; if reproduce ran anyway, it refuses on its own.
    result = wf.reproduce(event, allowed)
    assert result["status"] == "not-allowed" and result["candidates"] == 0
    assert not ran.exists()
    wf.publish(event)
    assert wf.server.discussions[node].comments == []


def test_other_labels_do_nothing(wf: Workflow) -> None:
    node = wf.server.add_discussion(REPO, number=11, title="Question", body="")
    event = wf.event("labeled_other_label.json", node)
    assert wf.gate(event) == "false"
    assert wf.reproduce(event, "true")["status"] == "ignored"
    wf.publish(event)
    assert wf.server.discussions[node].comments == []


def test_script_that_never_ends_gets_a_polite_time_limit_reply(wf: Workflow) -> None:
    node = wf.server.add_discussion(REPO, number=8, title="It hangs", body="")
    event = wf.event("labeled_never_ends.json", node)
    start = time.monotonic()
    result = wf.reproduce(event, "true", "--timeout", "3", "--max-time", "10")
    assert result["status"] == "timeout", result
    assert time.monotonic() - start < 60
    wf.publish(event)
    (reply,) = our_comments(wf, node)
    assert "time limit" in reply["body"] and "3 s per run" in reply["body"]


def test_ten_megabyte_body_is_refused_fast_and_politely(wf: Workflow) -> None:
    node = wf.server.add_discussion(REPO, number=9, title="Huge", body="")
    huge = "```python\n" + "x = 1\n" * (10 * 1024 * 1024 // 6) + "```\n"
    event = wf.event("labeled_no_failure.json", node, body=huge)
    start = time.monotonic()
    result = wf.reproduce(event, "true")
    elapsed = time.monotonic() - start
    assert result["status"] == "too-large" and result["body_bytes"] > 10_000_000
    assert result["candidates"] == 0  # refused before the markdown was even parsed
    assert elapsed < 30, elapsed
    wf.publish(event)
    (reply,) = our_comments(wf, node)
    assert "larger" in reply["body"] and len(reply["body"]) < 1000


def test_no_failure_no_script_and_syntax_error_replies(wf: Workflow) -> None:
    cases = [("labeled_no_failure.json", "no-failure", "finished without an error"),
             ("labeled_attachment.json", "attachment-only", "but no other attached file"),
             ("labeled_syntax_error.json", "syntax-error", "does not parse")]
    for n, (name, status, words) in enumerate(cases, start=20):
        node = wf.server.add_discussion(REPO, number=n, title=name, body="")
        event = wf.event(name, node)
        assert wf.reproduce(event, "true", "--timeout", "30")["status"] == status
        wf.publish(event)
        (reply,) = our_comments(wf, node)
        assert words in reply["body"], reply["body"]
