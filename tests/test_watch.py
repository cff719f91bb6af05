"""`reprobot watch`: a stored repro, filed as an issue on the local GitHub (tests/fakegithub.py),
re-run as fakelib's releases appear in a local wheel folder (fixed in 1.4, broken differently in
1.6), with real pip installs and real runs. One comment per finding, never two."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main
from tests.fakegithub import FakeGitHub
from tests.test_rerun import REPRO, RELEASES, _BODIES, base_venv, build_wheel, make_repro

REPO = "huggingface/peft"
FILER = "reprobot-bot"
COMMENTS = r"^/repos/huggingface/peft/issues/\d+/comments$"


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOT_ENV_CACHE", str(tmp_path / "envs"))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    base = tmp_path / "base"
    build_wheel(wheels, "fakelib", "1.0", _BODIES["old"])
    python = base_venv(base, wheels, "fakelib==1.0")
    folder = make_repro(tmp_path, python, REPRO, "fakelib==1.0\n", "watched")
    return tmp_path, wheels, python, folder


def release(wheels: Path, *versions: str) -> None:
    for v in versions:
        build_wheel(wheels, "fakelib", v, _BODIES[RELEASES[v]])


def file_issue(gh: FakeGitHub, folder: Path) -> dict:
    sig = json.loads((folder / "signature.json").read_text())["signature"]["id"]
    issue = gh.add_issue(REPO, title="compute(3) raises", user=FILER, body=f"...\n\n<!-- reprobot:sig={sig} -->\n")
    (folder / "filed.json").write_text(json.dumps({"issues": [{
        "repo": REPO, "number": issue["number"], "url": issue["html_url"], "signature_id": sig,
        "title": issue["title"], "filed_at": "2025-01-01T00:00:00Z", "created": True}]}))
    return issue


def watch(root: Path, python: Path, wheels: Path, *extra: str) -> int:
    return main(["watch", str(root / "repros"), "--python", str(python), "--no-index", "--find-links", str(wheels),
                 *extra])


def comments(gh: FakeGitHub, issue: dict) -> list[dict]:
    return gh.comments[(REPO.lower(), issue["number"])]


@pytest.fixture
def gh(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(REPO)
    return fake_github


def test_one_comment_per_finding_as_releases_appear(world, gh):
    root, wheels, python, folder = world
    issue = file_issue(gh, folder)
    # Someone else quoting the marker is not our comment: it must not stop the post.
    gh.add_comment(REPO, issue["number"], "<!-- reprobot:watch=x:fakelib==1.3:still-fails-on -->", user="octocat")
    release(wheels, "1.1", "1.2", "1.3")
    assert watch(root, python, wheels) == 0
    release(wheels, "1.4", "1.5")
    assert watch(root, python, wheels) == 0
    release(wheels, "1.6")
    assert watch(root, python, wheels) == 0
    assert watch(root, python, wheels) == 0     # nothing new: nothing posted, nothing run
    ours = [c["body"] for c in comments(gh, issue) if c["user"]["login"] == FILER]
    assert [b.splitlines()[0] for b in ours] == [
        "**reprobot watch:** the repro from this issue still fails on fakelib 1.3.",
        "**reprobot watch:** the repro from this issue passes since fakelib 1.4.",
        "**reprobot watch:** the repro from this issue fails differently since fakelib 1.6.",
    ]
    assert "+ fakelib==1.4" in ours[1] and "- fakelib==1.0" in ours[1]
    assert "| fakelib 1.4 | " in ours[1] and "| PASS |" in ours[1]
    assert "TypeError" in ours[2]
    state = json.loads((folder / "watch.json").read_text())
    assert state["checked"] == {"fakelib": "1.6"}
    assert [f["sentence"] for f in state["findings"]] == [
        "still fails on fakelib 1.3", "passes since fakelib 1.4", "fails differently since fakelib 1.6"]
    assert all(f["posted"] == {f"{REPO}#{issue['number']}": f["posted"][f"{REPO}#{issue['number']}"]}
               for f in state["findings"])
    # never anything but comments: no edits, closes, labels
    assert {(r.method, r.path.split("?")[0].rsplit("/", 1)[-1]) for r in gh.requests if r.method != "GET"} \
        == {("POST", "comments")}
    assert gh.issue(REPO, issue["number"])["state"] == "open"


def test_a_crash_between_post_and_record_does_not_post_twice(world, gh, monkeypatch):
    root, wheels, python, folder = world
    issue = file_issue(gh, folder)
    release(wheels, "1.1", "1.4")
    from bot.rerun import watch as w
    real_save = w.WatchState.save

    def crash_after_post(self):
        if any(f.posted for f in self.findings):
            raise KeyboardInterrupt("killed between the POST and the state write")
        real_save(self)

    monkeypatch.setattr(w.WatchState, "save", crash_after_post)
    assert watch(root, python, wheels) == 130    # the CLI's answer to an interrupt
    assert len(comments(gh, issue)) == 1
    monkeypatch.setattr(w.WatchState, "save", real_save)
    posts_before = len(gh.requests_to("POST", COMMENTS))
    assert watch(root, python, wheels) == 0
    assert len(gh.requests_to("POST", COMMENTS)) == posts_before     # found its marker, posted nothing
    [c] = comments(gh, issue)
    assert c["body"].startswith("**reprobot watch:** the repro from this issue passes since fakelib 1.4.")
    [f] = json.loads((folder / "watch.json").read_text())["findings"]
    assert f["posted"][f"{REPO}#{issue['number']}"] == c["html_url"]


def test_dry_run_posts_nothing_and_says_what_it_would(world, gh, capsys):
    root, wheels, python, folder = world
    issue = file_issue(gh, folder)
    release(wheels, "1.1", "1.2", "1.3", "1.4")
    capsys.readouterr()
    assert watch(root, python, wheels, "--dry-run", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    [entry] = out["folders"]
    assert [f["sentence"] for f in entry["new"]] == ["passes since fakelib 1.4"]
    [would] = entry["would_post"]
    assert would["issue"] == f"{REPO}#{issue['number']}" and would["marker"] in would["body"]
    assert gh.requests_to("POST", COMMENTS) == [] and comments(gh, issue) == []
    assert out["summary"] == "1 repro, 1 new finding(s), 1 comment(s) to post (dry run)"
    # turned on later, the recorded finding is posted without running anything again
    assert watch(root, python, wheels, "--post-only") == 0
    assert len(comments(gh, issue)) == 1
    assert " ".join(capsys.readouterr().out.split()).endswith("1 repro, 1 comment(s) posted")
    # and a run with nothing new still ends with its one line
    assert watch(root, python, wheels, "--post-only") == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "1 repro, nothing changed"


def test_issues_in_takes_owner_name_or_a_target_key(world, gh, capsys):
    root, wheels, python, folder = world
    issue = file_issue(gh, folder)
    release(wheels, "1.1", "1.4")
    assert watch(root, python, wheels, "--dry-run") == 0            # recorded, nothing posted
    assert watch(root, python, wheels, "--post-only", "--issues-in", "someone/fork") == 0
    assert comments(gh, issue) == []                                # another repository's token: no post here
    capsys.readouterr()
    assert watch(root, python, wheels, "--post-only", "--issues-in", "not a repo") == 2
    assert "neither OWNER/NAME nor a target key" in capsys.readouterr().err
    assert watch(root, python, wheels, "--post-only", "--issues-in", "peft") == 0   # the key of huggingface/peft
    [c] = comments(gh, issue)
    assert c["body"].startswith("**reprobot watch:** the repro from this issue passes since fakelib 1.4.")


def test_a_forged_filed_record_aims_no_comment(world, gh, capsys):
    """filed.json names someone else's issue (no marker of the filing account's): `watch` reads
    it back from GitHub, says why it is ignored and comments nowhere (#39)."""
    root, wheels, python, folder = world
    victim = gh.add_issue(REPO, title="unrelated", user="someone-else", body="nothing of ours")
    (folder / "filed.json").write_text(json.dumps({"issues": [{
        "repo": REPO, "number": victim["number"], "url": victim["html_url"], "signature_id": "x",
        "title": "t", "filed_at": "2025-01-01T00:00:00Z", "created": True}]}))
    release(wheels, "1.1", "1.4")
    assert watch(root, python, wheels, "--dry-run") == 0        # a finding recorded
    capsys.readouterr()
    assert watch(root, python, wheels, "--post-only") == 0
    assert comments(gh, victim) == [] and gh.requests_to("POST", COMMENTS) == []
    assert "filed.json ignored: " in " ".join(capsys.readouterr().out.split())
