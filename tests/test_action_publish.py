"""The Action's GitHub side against the local fake GitHub: the gate, the one reply, its edits."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bot.action.workflow import gate, publish
from bot.action.event import load_event
from bot.action.publish import find_own_reply, post_reply, sender_permission
from bot.action.render import marker
from bot.action.result import ActionResult
from bot.cli import main
from bot.issue.github import github_client
from tests.fakegithub import FakeGitHub

EVENTS = Path(__file__).parent / "data" / "events"
REPO = "octo/widgets"


@pytest.fixture
def gh(fake_github: FakeGitHub):
    fake_github.add_repo(REPO)
    fake_github.set_permission(REPO, "maint", "triage")
    # The post as the labelled event carries it: the gate and publish compare the two.
    body = load_event(EVENTS / "labeled_failing.json").body
    node = fake_github.add_discussion(REPO, number=7, title="t", body=body)
    return fake_github, node, github_client(api_url=fake_github.url, write=True)


def event_for(name: str, node: str):
    return dataclasses.replace(load_event(EVENTS / name), node_id=node)


@pytest.mark.parametrize("perm,allowed", [("admin", True), ("maintain", True), ("write", True), ("triage", True),
                                          ("read", False), ("none", False)])
def test_triage_or_more_may_trigger(gh, perm: str, allowed: bool) -> None:
    server, node, client = gh
    server.set_permission(REPO, "someone", perm)
    assert sender_permission(client, REPO, "someone").can_triage is allowed
    ev = dataclasses.replace(event_for("labeled_failing.json", node), sender="someone")
    assert gate(ev, client).allowed is allowed


def test_gate_ignores_other_labels_without_asking_github(gh) -> None:
    server, node, client = gh
    decision = gate(event_for("labeled_other_label.json", node), client)
    assert not decision.allowed and "question" in decision.reason
    assert server.requests_to("GET", r"/collaborators/") == []
    # A public user who is no collaborator reads as "read": not allowed.
    assert not gate(event_for("labeled_by_outsider.json", node), client).allowed


def test_one_reply_then_edits_and_never_someone_elses(gh) -> None:
    server, node, client = gh
    # A user pastes our marker into their own comment, and our token has an unmarked comment:
    # neither is "our reply".
    server.add_discussion_comment(node, marker(node) + "\nfake", author="mallory")
    server.add_discussion_comment(node, "an unrelated note", author="reprobot-bot")
    assert find_own_reply(client, node) is None
    first = post_reply(client, node, marker(node) + "\nfirst")
    assert first.action == "added"
    second = post_reply(client, node, marker(node) + "\nsecond")
    assert (second.action, second.comment_id) == ("updated", first.comment_id)
    bodies = [c["body"] for c in server.discussions[node].comments]
    assert bodies == [marker(node) + "\nfake", "an unrelated note", marker(node) + "\nsecond"]
    with pytest.raises(ValueError):
        post_reply(client, node, "no marker")


def test_publish_with_a_tampered_artifact_says_it_could_not_finish(gh, tmp_path: Path) -> None:
    server, node, client = gh
    (tmp_path / "result.json").write_text('{"schema": 1, "status": "rm -rf /"}')
    out = publish(event_for("labeled_failing.json", node), tmp_path, client)
    assert out.posted is not None and out.posted.action == "added"
    body = server.discussions[node].comments[-1]["body"]
    assert "could not finish" in body and "rm -rf" not in body


def test_publish_rechecks_the_sender_and_the_silent_statuses(gh, tmp_path: Path) -> None:
    server, node, client = gh
    ActionResult("reduced", discussion=10).write(tmp_path)
    out = publish(event_for("labeled_by_outsider.json", node), tmp_path, client)
    assert out.posted is None and "cannot triage" in out.reason
    ActionResult("not-allowed", discussion=7).write(tmp_path)
    assert publish(event_for("labeled_failing.json", node), tmp_path, client).posted is None
    assert publish(event_for("labeled_other_label.json", node), tmp_path, client).posted is None
    assert server.discussions[node].comments == []


def test_gate_cli_writes_the_step_output(gh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server, node, _ = gh
    out = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    src = (EVENTS / "labeled_failing.json").read_text().replace("D_kwDOfake0000001", node)
    (tmp_path / "ev.json").write_text(src)
    assert main(["action", "gate", "--event", str(tmp_path / "ev.json")]) == 0
    src = (EVENTS / "labeled_by_outsider.json").read_text().replace("D_kwDOfake0000001", node)
    (tmp_path / "ev2.json").write_text(src)
    assert main(["action", "gate", "--event", str(tmp_path / "ev2.json")]) == 0
    assert out.read_text() == "allowed=true\nallowed=false\n"
    # No token: a one-line error and a distinct exit status, never a traceback.
    monkeypatch.delenv("GITHUB_TOKEN")
    assert main(["action", "gate", "--event", str(tmp_path / "ev.json")]) == 10


def test_publish_without_an_artifact_replies_that_the_run_could_not_finish(gh, tmp_path: Path) -> None:
    server, node, client = gh
    empty = tmp_path / "artifact"
    empty.mkdir()  # reproduce failed before uploading: the workflow's publish step still runs
    out = publish(event_for("labeled_failing.json", node), empty, client)
    assert out.posted is not None
    assert "could not finish" in server.discussions[node].comments[-1]["body"]
