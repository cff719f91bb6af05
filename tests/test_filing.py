"""`reprobot file --submit` against a local GitHub (tests/fakegithub.py): files once, never
re-sends a POST, finds its own marker, refuses unsafe or incomplete drafts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main
from bot.issue.draft import marker
from reducer.errors import ExitCode
from tests.draft_support import copy_repro
from tests.fakegithub import FakeGitHub

REPO = "huggingface/peft"
FILER = "reprobot-bot"  # the login tests/fakegithub.py maps the test token to
ISSUES = r"^/repos/huggingface/peft/issues$"


@pytest.fixture
def repro(tmp_path: Path) -> Path:
    return copy_repro(tmp_path)


@pytest.fixture
def gh(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(REPO)
    return fake_github


def sig_id(repro: Path) -> str:
    return json.loads((repro / "signature.json").read_text())["signature"]["id"]


def submit(repro: Path) -> int:
    return main(["file", str(repro), "--submit", "--yes", "--repo", "peft"])


def issues_in(gh: FakeGitHub) -> list[dict]:
    return list(gh.issues[REPO.lower()].values())


def flat(text: str) -> str:
    return " ".join(text.split())


def test_submit_creates_once_then_says_already_filed(repro: Path, gh: FakeGitHub,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert submit(repro) == 0
    posts = gh.requests_to("POST", ISSUES)
    assert len(posts) == 1
    payload = posts[0].body
    assert set(payload) == {"title", "body"}  # no labels, no assignees
    assert marker(sig_id(repro)) in payload["body"]
    assert "reprobot:notes" not in payload["body"] and "reprobot:confirm" not in payload["body"]
    assert payload["body"].lstrip().startswith("### System Info")
    [issue] = issues_in(gh)
    filed = json.loads((repro / "filed.json").read_text())["issues"]
    assert filed[0]["url"] == issue["html_url"] and filed[0]["created"] is True
    assert f"filed: {issue['html_url']}" in flat(capsys.readouterr().out)

    seen = len(gh.requests)
    assert submit(repro) == 0
    assert f"already filed: {issue['html_url']}" in flat(capsys.readouterr().out)
    # answered from filed.json once the issue was read back: GETs only
    assert {r.method for r in gh.requests[seen:]} == {"GET"}
    assert len(issues_in(gh)) == 1


def test_an_issue_with_the_marker_is_adopted_not_duplicated(repro: Path, gh: FakeGitHub,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    existing = gh.add_issue(REPO, title="filed from another machine", user=FILER,
                            body="### Reproduction\n\n...\n\n" + marker(sig_id(repro)) + "\n")
    assert submit(repro) == 0
    assert gh.requests_to("POST", ISSUES) == []
    assert f"already filed: {existing['html_url']}" in flat(capsys.readouterr().out)
    filed = json.loads((repro / "filed.json").read_text())["issues"][0]
    assert filed["number"] == existing["number"] and filed["created"] is False


def test_502_after_the_issue_was_created_is_not_retried(repro: Path, gh: FakeGitHub,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    gh.fail_next("POST", ISSUES, 502, after=True)
    assert submit(repro) == 0
    assert len(gh.requests_to("POST", ISSUES)) == 1
    [issue] = issues_in(gh)
    out = flat(capsys.readouterr().out)
    assert f"GitHub reported an error, but the issue exists): {issue['html_url']}" in out
    assert json.loads((repro / "filed.json").read_text())["issues"][0]["number"] == issue["number"]


def test_502_before_creation_reports_clearly_and_a_rerun_files_once(repro: Path, gh: FakeGitHub,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    gh.fail_next("POST", ISSUES, 502)
    assert submit(repro) == ExitCode.NETWORK
    err = flat(capsys.readouterr().err)
    assert "GitHub answered 502" in err and "not re-sent" in err and "Traceback" not in err
    assert len(gh.requests_to("POST", ISSUES)) == 1 and issues_in(gh) == []
    assert not (repro / "filed.json").exists()
    assert submit(repro) == 0
    assert len(gh.requests_to("POST", ISSUES)) == 2 and len(issues_in(gh)) == 1


def test_rerun_after_lost_answer_adopts_without_a_second_post(repro: Path, gh: FakeGitHub,
                                                              capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import bot.issue.filing as filing

    real = filing.find_marked
    calls = {"n": 0}

    def find_then_lose_github(client, repo, sig):
        # The check right after the failed POST finds GitHub's search failing too (every retry).
        calls["n"] += 1
        if calls["n"] == 2:
            gh.fail_next("GET", r"^/search/issues$", 502, times=20)
            gh.fail_next("GET", r"^/repos/huggingface/peft/issues$", 502, times=20)
        return real(client, repo, sig)

    monkeypatch.setattr(filing, "find_marked", find_then_lose_github)
    gh.fail_next("POST", ISSUES, 502, after=True)
    assert submit(repro) == ExitCode.NETWORK
    err = flat(capsys.readouterr().err)
    assert "not re-sent" in err and "looks for the marker before filing" in err
    assert len(gh.requests_to("POST", ISSUES)) == 1 and len(issues_in(gh)) == 1
    assert not (repro / "filed.json").exists()
    gh.faults.clear()  # GitHub is back
    # The re-run searches first, finds the marker, and does not POST again.
    assert submit(repro) == 0
    assert len(gh.requests_to("POST", ISSUES)) == 1 and len(issues_in(gh)) == 1
    assert "already filed: https://github.com/huggingface/peft/issues/1" in flat(capsys.readouterr().out)


def test_missing_token_is_one_line(repro: Path, gh: FakeGitHub, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    assert submit(repro) == ExitCode.NO_TOKEN
    err = capsys.readouterr().err.strip()
    assert "GITHUB_TOKEN" in err and len(err.splitlines()) <= 2 and "Traceback" not in err
    assert gh.requests == []


def test_a_secret_in_the_draft_fails_closed(repro: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["draft", str(repro), "--repo", "peft"]) == 0
    md = repro / "draft-peft.md"
    token = "gh" + "p_" + "Zq3" * 12
    md.write_text(md.read_text().replace("Save it as", f"(token {token}) Save it as"))
    assert submit(repro) == ExitCode.UNSAFE
    err = flat(capsys.readouterr().err)
    assert "refusing to file: github_token" in err and token not in err and token[4:16] not in err
    assert gh.requests == []  # nothing left the machine


def test_an_incomplete_draft_is_not_filed(repro: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]) -> None:
    (repro / "env.json").unlink()
    assert main(["file", str(repro), "--submit", "--yes", "--repo", "peft",
                 "--python", str(repro / "no-such-python")]) == ExitCode.BAD_INPUT
    assert "system-info: required but empty" in flat(capsys.readouterr().err)
    assert gh.requests == []


def test_submit_without_yes_needs_a_terminal(repro: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["file", str(repro), "--submit", "--repo", "peft"]) == ExitCode.USAGE
    assert "--yes" in capsys.readouterr().err
    assert gh.requests_to("POST", ISSUES) == []


def test_search_lag_and_no_user_endpoint_still_find_the_issue(repro: Path, gh: FakeGitHub,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """An App installation token cannot read /user (403) and search has not indexed the new
    issue yet: GraphQL's viewer names the filer, the repository's recent issues are read
    directly, and the marker is found in the filer's own issue."""
    existing = gh.add_issue(REPO, title="filed a minute ago", body="...\n\n" + marker(sig_id(repro)) + "\n",
                            user=FILER)
    gh.fail_next("GET", r"^/search/issues$", 200, times=5,
                 body={"total_count": 0, "incomplete_results": False, "items": []})
    gh.fail_next("GET", r"^/user$", 403, times=5)
    assert submit(repro) == 0
    assert gh.requests_to("POST", ISSUES) == []
    assert f"already filed: {existing['html_url']}" in flat(capsys.readouterr().out)


def test_could_not_check_is_never_not_found(repro: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]) -> None:
    gh.fail_next("GET", r"^/search/issues$", 502, times=20)
    gh.fail_next("GET", r"^/user$", 403, times=20)
    gh.fail_next("GET", r"^/repos/huggingface/peft/issues$", 500, times=20)
    assert submit(repro) == ExitCode.NETWORK
    err = flat(capsys.readouterr().err)
    assert "could not check huggingface/peft for an issue already filed" in err and "nothing was filed" in err
    assert gh.requests_to("POST", ISSUES) == [] and issues_in(gh) == []


def test_two_submits_at_once_file_one_issue(repro: Path, gh: FakeGitHub) -> None:
    """Two `file --submit` processes on the same folder: the lock lets one file; the other
    says another is filing, or finds the issue already filed."""
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "REPROBOT_GITHUB_API": gh.url, "GITHUB_TOKEN": "test-token"}
    cmd = [sys.executable, "-m", "bot", "file", str(repro), "--submit", "--yes", "--repo", "peft", "--no-search"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=120), p.stdout.read() + p.stderr.read()) for p in procs]
    assert len(issues_in(gh)) == 1 and len(gh.requests_to("POST", ISSUES)) == 1, results
    # the other: "another is filing" (the lock), or "already filed" when it came after
    assert sorted(code for code, _ in results) in ([0, 0], [0, ExitCode.USAGE], [0, ExitCode.BUSY]), results


def test_a_script_whose_private_value_was_scrubbed_waits_for_a_person(repro: Path, gh: FakeGitHub,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Scrubbing an address inside the repro's code changes the script a maintainer would run:
    the preview says which line, and filing refuses until a stand-in value is there."""
    assert main(["draft", str(repro), "--repo", "peft"]) == 0
    md = repro / "draft-peft.md"
    text = md.read_text()
    md.write_text(text.replace("```python\n", "```python\nHOST = \"<ip>\"\n", 1))
    capsys.readouterr()
    assert main(["file", str(repro), "--dry-run", "--repo", "peft"]) == 0
    assert "needs you: line 1 of the script in the draft holds <ip>" in flat(capsys.readouterr().out)
    assert submit(repro) == ExitCode.UNSAFE
    assert "line 1 of the script in draft-peft.md holds <ip>" in flat(capsys.readouterr().err)
    assert gh.requests_to("POST", ISSUES) == []
    md.write_text(text.replace("```python\n", "```python\nHOST = \"192.0.2.1\"\n", 1))  # a documentation address
    assert submit(repro) == 0


# --- whose marker counts ----------------------------------------------------------------------

def quoted_in_fence(m: str) -> str:
    return f"reprobot keeps filing this, see:\n\n```\n{m}\n```\n"


def quoted_inline(m: str) -> str:
    return f"Its marker is `{m}` in every body.\n"


def quoted_in_blockquote(m: str) -> str:
    return f"> {m}\n"


def bare(m: str) -> str:
    return f"### Reproduction\n\n...\n\n{m}\n"


@pytest.mark.parametrize("author,body", [
    ("mallory", quoted_in_fence),     # the red-team finding: another user quotes the marker
    ("mallory", bare),                # another user copies it as a real comment
    (FILER, quoted_in_fence),         # ours, but only showing the marker
    (FILER, quoted_inline),
    (FILER, quoted_in_blockquote),
], ids=["other-fenced", "other-bare", "own-fenced", "own-inline-code", "own-blockquote"])
def test_a_marker_that_is_not_our_own_comment_does_not_stop_filing(repro: Path, gh: FakeGitHub, author: str,
                                                                   body, capsys: pytest.CaptureFixture[str]) -> None:
    decoy = gh.add_issue(REPO, title="decoy", body=body(marker(sig_id(repro))), user=author)
    assert submit(repro) == 0
    assert len(gh.requests_to("POST", ISSUES)) == 1
    out = flat(capsys.readouterr().out)
    assert "already filed" not in out and decoy["html_url"] not in out
    created = [i for i in issues_in(gh) if i["number"] != decoy["number"]]
    assert [i["user"]["login"] for i in created] == [FILER]


def test_our_own_issue_is_found_among_decoys(repro: Path, gh: FakeGitHub,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Search returns the decoys first (newest first); the filer's own marked issue still wins."""
    own = gh.add_issue(REPO, title="ours", body=bare(marker(sig_id(repro))), user=FILER,
                       created_at="2020-01-01T00:00:00Z")
    for who, body in [("mallory", quoted_in_fence), ("mallory", bare), (FILER, quoted_in_fence)]:
        gh.add_issue(REPO, title="decoy", body=body(marker(sig_id(repro))), user=who)
    assert submit(repro) == 0
    assert gh.requests_to("POST", ISSUES) == []
    assert f"already filed: {own['html_url']}" in flat(capsys.readouterr().out)


def test_an_app_token_is_recognised_by_its_bot_login(repro: Path, gh: FakeGitHub,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An installation token: /user answers 403, GraphQL's viewer answers ``<slug>[bot]``."""
    gh.tokens["app-token"] = "reprobot-app[bot]"
    monkeypatch.setenv("GITHUB_TOKEN", "app-token")
    gh.fail_next("GET", r"^/user$", 403, times=20)
    gh.add_issue(REPO, title="someone else's", body=bare(marker(sig_id(repro))), user="reprobot-bot")
    own = gh.add_issue(REPO, title="ours", body=bare(marker(sig_id(repro))), user="reprobot-app[bot]")
    assert submit(repro) == 0
    assert gh.requests_to("POST", ISSUES) == []
    assert f"already filed: {own['html_url']}" in flat(capsys.readouterr().out)


def test_no_identity_no_filing(repro: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]) -> None:
    """Without knowing who files, no issue can be told to be ours: nothing is sent."""
    gh.fail_next("GET", r"^/user$", 403, times=20)
    gh.fail_next("POST", r"^/graphql$", 403, times=20)
    assert submit(repro) == ExitCode.NETWORK
    assert "REPROBOT_FILER_LOGIN" in flat(capsys.readouterr().err)
    assert gh.requests_to("POST", ISSUES) == []


def test_find_marked_with_pygithub(gh: FakeGitHub) -> None:
    """find_marked itself, through a PyGithub client of reprobot's own making."""
    from bot.issue.filing import find_marked
    from bot.issue.github import github_client

    client = github_client("test-token", api_url=gh.url, write=True)
    sig = "0123456789"
    for who, body in [("mallory", bare), ("mallory", quoted_in_fence), (FILER, quoted_in_fence),
                      (FILER, quoted_inline)]:
        gh.add_issue(REPO, title="decoy", body=body(marker(sig)), user=who)
    assert find_marked(client, REPO, sig) is None
    own = gh.add_issue(REPO, title="ours", body=bare(marker(sig)), user=FILER)
    found = find_marked(client, REPO, sig)
    assert found is not None and found.number == own["number"]


def test_preflight_is_what_the_preview_shows_and_what_submit_refuses(repro: Path, gh: FakeGitHub,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """One rule set (bot/issue/filing.py:preflight): --dry-run prints each problem's preview,
    --submit stops on the first with its refusal and exit code."""
    from bot.issue.filing import draft_for_filing, preflight
    from bot.store import ReproDir

    assert main(["draft", str(repro), "--repo", "peft"]) == 0
    md = repro / "draft-peft.md"
    text = md.read_text()
    md.write_text(text.replace("```python\n", "```python\nHOST = \"<ip>\"\n", 1))
    folder = ReproDir.open(repro)
    draft, _, secrets = draft_for_filing(folder, "peft")
    problems = preflight(folder, draft, "peft", secrets).problems
    assert [p.rule for p in problems] == ["placeholder"]
    assert problems[0].blocks(set(), yes=True) and problems[0].waiver is None
    capsys.readouterr()
    assert main(["file", str(repro), "--dry-run", "--repo", "peft"]) == 0
    assert flat(problems[0].preview) in flat(capsys.readouterr().out)
    assert submit(repro) == problems[0].exit_code == ExitCode.UNSAFE
    assert flat(capsys.readouterr().err) == "reprobot: " + flat(problems[0].refusal)
    assert gh.requests_to("POST", ISSUES) == []
    # A draft with nothing wrong has no problem, and files.
    md.write_text(text)
    draft, _, secrets = draft_for_filing(folder, "peft")
    assert preflight(folder, draft, "peft", secrets).problems == []
    assert submit(repro) == 0


def test_the_preview_shows_the_body_preflight_built_once(repro: Path, gh: FakeGitHub, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """--dry-run builds the body as sent once, in preflight, and shows that body and that verdict."""
    import bot.commands.file as file_command
    import bot.issue.filing as filing
    from bot.issue.draft import Draft

    built, validated = [], []
    real_body, real_validate = filing.submission_body, Draft.validate
    monkeypatch.setattr(filing, "submission_body", lambda d: built.append(1) or real_body(d))
    monkeypatch.setattr(file_command, "submission_body", filing.submission_body, raising=False)
    monkeypatch.setattr(Draft, "validate", lambda self: validated.append(1) or real_validate(self))
    assert main(["draft", str(repro), "--repo", "peft"]) == 0
    built.clear(), validated.clear()
    assert main(["file", str(repro), "--dry-run", "--repo", "peft", "--no-search"]) == 0
    assert len(built) == 1 and len(validated) == 1
    assert "valid" in capsys.readouterr().out
