"""The issue index: extraction, import, and `index sync` through real PyGithub against the
local GitHub server (tests/fakegithub.py): pagination, since, comments, rate limits."""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from bot.cli import main
from bot.issue.github import github_client
from bot.upstream.index import IssueIndex, extract, fts_query, import_file, sync
from reducer.errors import ExitCode, ReprobotError
from tests.fakegithub import FakeGitHub

DATA = Path(__file__).parent / "data"
SEED_TB = (DATA / "tracebacks" / "seed_is_hf_initialized.txt").read_text(encoding="utf-8")
REPO = "huggingface/accelerate"


def issue_json(n: int, title: str, body: str = "", state: str = "open", updated: str = "2026-03-01T00:00:00Z",
               repo: str = REPO, pr: dict | None = None) -> dict:
    obj = {"number": n, "title": title, "body": body, "state": state, "labels": [{"name": "bug"}],
           "html_url": f"https://github.com/{repo}/{'pull' if pr else 'issues'}/{n}",
           "repository_url": f"https://api.github.com/repos/{repo}", "created_at": updated, "updated_at": updated,
           "closed_at": updated if state == "closed" else None}
    if pr is not None:
        obj["pull_request"] = pr
    return obj


# --- extraction ------------------------------------------------------------------------------

def test_extract_uses_the_reducers_parser_on_the_body() -> None:
    body = f"### System Info\n- transformers version: 5.6.2\n- accelerate==1.13.0\n\n```\n{SEED_TB}```\n"
    facts = extract("TypeError in load_adapter", body, "", REPO, is_pr=False)
    assert facts.exc_type == "TypeError"
    assert facts.message == "Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'"
    assert facts.frames[0] == "accelerate/utils/modeling.py:set_module_tensor_to_device"
    assert facts.frames[-1] == "peft/peft_model.py:from_pretrained"
    assert facts.versions == {"transformers": "5.6.2", "accelerate": "1.13.0"}


def test_extract_fix_references() -> None:
    thread = "This was fixed in accelerate 1.14 by #3976.\nAlso see huggingface/peft#12"
    facts = extract("x", "no traceback here", thread, "huggingface/transformers", is_pr=False)
    assert facts.fixed_by == ["huggingface/accelerate#3976"]
    assert facts.fixed_in == [("accelerate", "1.14")]
    pr = extract("Fix is_hf_initialized", "Fixes #43872 and closes huggingface/peft#3", "", REPO, is_pr=True)
    assert pr.fixes == [f"{REPO}#43872", "huggingface/peft#3"]
    assert "huggingface/peft#3" in pr.mentions


def test_extract_error_line_without_traceback() -> None:
    facts = extract("KeyError: 'mistral'", "", "", "huggingface/transformers", is_pr=False)
    assert (facts.exc_type, facts.message) == ("KeyError", "'mistral'")


def test_fts_query_quotes_words() -> None:
    q = fts_query('TypeError: "x" OR NEAR(a b) _is_hf_initialized')
    assert '"_is_hf_initialized"' in q and "NEAR(" not in q


def test_an_identifiers_parts_find_a_near_identifier(tmp_path: Path) -> None:
    """FTS5 splits identifiers at ``_``: the quoted identifier is a phrase only the same name
    matches, so its parts are words of the query too, and a neighbour's name counts."""
    message = "no attribute 'cquantize_blockwise_fp16_nf4'"
    assert fts_query(message + " _create_new_module", split=message).split(" OR ") == [
        '"attribute"', '"cquantize_blockwise_fp16_nf4"', '"cquantize"', '"blockwise"', '"fp16"', '"nf4"',
        '"_create_new_module"']
    f = tmp_path / "issues.json"
    f.write_text(json.dumps([
        issue_json(1, "AttributeError: 'NoneType' object has no attribute 'cquantize_blockwise_fp16_fp4'", ""),
        *(issue_json(n, f"AttributeError: 'NoneType' object has no attribute '{name}'", "")
          for n, name in enumerate(["decode", "shape", "device", "tokenize", "to_dict"], start=2)),
    ]))
    with IssueIndex.open(tmp_path / "db.sqlite3") as index:
        import_file(index, f)
        error = "AttributeError 'NoneType' object has no attribute 'cquantize_blockwise_fp16_nf4'"
        hits = index.bm25(error, split=error)
        assert list(hits)[0] == index.get(REPO, 1).id
        assert hits[index.get(REPO, 1).id] > 2 * max(v for k, v in hits.items() if k != index.get(REPO, 1).id)


# --- import ------------------------------------------------------------------------------------

def test_import_then_search(tmp_path: Path) -> None:
    f = tmp_path / "issues.json"
    f.write_text(json.dumps([
        issue_json(1, "Params4bit got an unexpected keyword argument", f"```\n{SEED_TB}```", state="closed"),
        issue_json(2, "Unrelated docs typo", "the docs say teh"),
        issue_json(3, "Fix is_hf_initialized attribute", "Fixes #1", state="closed",
                   pr={"merged_at": "2026-03-16T00:00:00Z"}),
    ]))
    with IssueIndex.open(tmp_path / "db.sqlite3") as index:
        stats = import_file(index, f)
        assert (stats.added, stats.updated) == (3, 0)
        hits = index.bm25("Params4bit unexpected keyword argument _is_hf_initialized")
        assert next(iter(hits)) == index.get(REPO, 1).id
        assert index.get(REPO, 3).is_pr and index.get(REPO, 3).merged
        assert [p.number for p in index.prs_fixing(f"{REPO}#1")] == [3]
        assert index.last_sync(REPO) == "2026-03-01T00:00:00Z"
        assert import_file(index, f).updated == 3  # idempotent: upserts
        assert index.count() == 3


@pytest.mark.parametrize("content, fragment", [
    ("{not json", "not valid JSON"),
    ('{"a": 1}', "expected a JSON list"),
    ('[{"number": 1, "title": "ok", "html_url": "https://github.com/a/b/issues/1"}, {"title": "no number"}]',
     "item 1 is not a GitHub issue object"),
    ('[{"number": 1, "title": "no repo"}]', "cannot tell its repository"),
])
def test_malformed_import_is_one_line_error_and_writes_nothing(tmp_path: Path, content: str, fragment: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(content)
    db = tmp_path / "db.sqlite3"
    with IssueIndex.open(db) as index:
        with pytest.raises(ReprobotError) as e:
            import_file(index, f)
        assert e.value.exit_code == ExitCode.BAD_INPUT
        assert fragment in e.value.message and "\n" not in e.value.message
        assert index.count() == 0  # the valid first item was not kept either


def test_not_an_index_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.sqlite3"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ReprobotError) as e:
        IssueIndex.open(bad)
    assert e.value.exit_code == ExitCode.BAD_INPUT


def test_cli_import_and_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "issues.json"
    f.write_text(json.dumps([issue_json(7, "A", "b")]))
    db = str(tmp_path / "db.sqlite3")
    assert main(["index", "import", str(f), "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["added"] == 1
    assert main(["index", "status", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["n"] == 1
    assert main(["index", "import", str(tmp_path / "missing.json"), "--db", db]) == ExitCode.FILE_MISSING


# --- sync against the local GitHub -------------------------------------------------------------

def seed_server(fake: FakeGitHub, n: int = 150) -> None:
    fake.add_repo(REPO)
    for i in range(1, n + 1):
        body = f"```\n{SEED_TB}```" if i == 5 else f"body {i}"
        fake.add_issue(REPO, number=i, title=f"issue {i}", body=body, state="closed" if i % 2 else "open",
                       updated_at=f"2026-01-{1 + i % 28:02d}T00:00:{i % 60:02d}Z", is_pr=i % 10 == 0,
                       merged_at="2026-01-02T00:00:00Z" if i % 10 == 0 else None)
    fake.add_comment(REPO, 5, "fixed in accelerate 1.14 by #3976")


def test_sync_paginates_and_reads_fix_comments(fake_github: FakeGitHub, tmp_path: Path) -> None:
    seed_server(fake_github)
    with IssueIndex.open(tmp_path / "db.sqlite3") as index:
        stats = sync(index, REPO, client=github_client(), per_page=40)
        assert stats.fetched == 150 and stats.pages == 4
        assert index.count(REPO) == 150
        five = index.get(REPO, 5)
        assert five.exc_type == "TypeError" and five.fixed_in == [("accelerate", "1.14")]
        assert five.fixed_by == ["huggingface/accelerate#3976"]
        assert index.get(REPO, 10).is_pr
        assert index.last_sync(REPO) == max(i["updated_at"] for i in fake_github.issues[REPO].values())
    lists = fake_github.requests_to("GET", r"/issues$")
    assert [r.query.get("page", ["1"])[0] for r in lists] == ["1", "2", "3", "4"]
    assert all(r.query["state"] == ["all"] and r.query["sort"] == ["updated"] for r in lists)
    # Closed issues with comments had their thread read (issue 5 only has comments).
    assert [r.path for r in fake_github.requests_to("GET", r"/comments$")] == [f"/repos/{REPO}/issues/5/comments"]


def test_sync_is_incremental_with_since(fake_github: FakeGitHub, tmp_path: Path) -> None:
    seed_server(fake_github, 20)
    db = tmp_path / "db.sqlite3"
    with IssueIndex.open(db) as index:
        sync(index, REPO, client=github_client())
        mark = index.last_sync(REPO)
        fake_github.add_issue(REPO, number=21, title="new one", updated_at="2026-02-15T00:00:00Z")
        stats = sync(index, REPO, client=github_client())
        assert stats.since == mark
        assert stats.fetched == 2  # the new issue, plus the one updated at the watermark itself
        assert index.count(REPO) == 21 and index.last_sync(REPO) == "2026-02-15T00:00:00Z"
    assert fake_github.requests_to("GET", r"/issues$")[-1].query["since"] == [mark]


def test_an_unchanged_repository_answers_304_and_costs_no_rate_limit(fake_github: FakeGitHub, tmp_path: Path) -> None:
    seed_server(fake_github, 20)
    with IssueIndex.open(tmp_path / "db.sqlite3") as index:
        sync(index, REPO, client=github_client())
        # the first sync from the new watermark reads the boundary issue again and keeps the ETag
        again = sync(index, REPO, client=github_client())
        assert again.fetched == 1 and not again.not_modified
        before = fake_github.rate["core"].remaining
        quiet = sync(index, REPO, client=github_client())
        assert quiet.not_modified and quiet.fetched == 0 and quiet.pages == 0
        last = fake_github.requests_to("GET", r"/issues$")[-1]
        assert last.status == 304 and last.headers.get("if-none-match", "").startswith('W/"')
        assert fake_github.rate["core"].remaining == before - 1       # /repos only; the 304 is free
        fake_github.add_issue(REPO, number=21, title="new one", updated_at="2026-02-15T00:00:00Z")
        fresh = sync(index, REPO, client=github_client())
        assert not fresh.not_modified and fresh.fetched == 2 and index.count(REPO) == 21


def test_an_exhausted_sync_continues_where_it_stopped(fake_github: FakeGitHub, tmp_path: Path) -> None:
    seed_server(fake_github, 100)
    fake_github.set_rate("core", remaining=3, reset=int(time.time()) + 3600)
    with IssueIndex.open(tmp_path / "db.sqlite3") as index:
        with pytest.raises(ReprobotError):
            sync(index, REPO, client=github_client(max_wait=2), comments=False, per_page=20)
        mark = index.last_sync(REPO)
        fake_github.set_rate("core", remaining=5000)
        stats = sync(index, REPO, client=github_client(), comments=False, per_page=20)
        assert stats.since == mark and index.count(REPO) == 100
        # it asked from the watermark, not from the beginning
        assert fake_github.requests_to("GET", r"/issues$")[-stats.pages].query["since"] == [mark]


def test_sync_survives_one_secondary_rate_limit(fake_github: FakeGitHub, tmp_path: Path) -> None:
    seed_server(fake_github, 30)
    fake_github.fail_next("GET", rf"^/repos/{REPO}/issues$", 403, {"Retry-After": "1"})
    client = github_client()
    with IssueIndex.open(tmp_path / "db.sqlite3") as index:
        stats = sync(index, REPO, client=client)
        assert stats.fetched == 30 and index.count(REPO) == 30
    statuses = [r.status for r in fake_github.requests_to("GET", r"/issues$")]
    assert statuses == [403, 200]
    # PyGithub read the X-RateLimit-* headers of the responses (the 403 was not counted).
    counted = sum(1 for r in fake_github.requests if r.status != 403)
    assert client.requester.rate_limiting == (5000 - counted, 5000)


def test_exhausted_rate_limit_mid_sync_keeps_a_consistent_index(fake_github: FakeGitHub, tmp_path: Path) -> None:
    seed_server(fake_github, 100)
    # Enough budget for /repos and two pages of 20, then the primary limit is gone for an hour.
    fake_github.set_rate("core", remaining=3, reset=int(time.time()) + 3600)
    db = tmp_path / "db.sqlite3"
    with IssueIndex.open(db) as index:
        with pytest.raises(ReprobotError) as e:
            sync(index, REPO, client=github_client(max_wait=2), comments=False, per_page=20)
        assert e.value.exit_code == ExitCode.NETWORK and "rate limit exhausted" in e.value.message
        # Two whole pages committed with their watermark; nothing of the third.
        assert index.count(REPO) == 40
        rows = index.conn.execute("SELECT max(updated_at) FROM issues WHERE repo=?", (REPO,)).fetchone()[0]
        assert index.last_sync(REPO) == rows


def test_sync_unknown_repo_and_missing_token(fake_github: FakeGitHub, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "db.sqlite3")
    # --repo takes a target's key; owner/name is mapped to it; anything else is a one-line usage
    # error before any request (a repository reprobot does not draft for has nothing to dedup).
    assert main(["index", "sync", "--repo", "huggingface/nope", "--db", db]) == ExitCode.USAGE
    assert main(["index", "sync", "--repo", "not-a-repo", "--db", db]) == ExitCode.USAGE
    assert fake_github.requests_to("GET", r".*") == []
    monkeypatch.delenv("GITHUB_TOKEN")
    assert main(["index", "sync", "--repo", REPO, "--db", db]) == ExitCode.NO_TOKEN
    assert main(["index", "sync", "--repo", "accelerate", "--db", db]) == ExitCode.NO_TOKEN


def test_cli_sync(fake_github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed_server(fake_github, 12)
    db = str(tmp_path / "db.sqlite3")
    assert main(["index", "sync", "--repo", REPO, "--db", db, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out[0]["fetched"] == 12 and out[0]["indexed"] == 12
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM issues_fts WHERE issues_fts MATCH 'issue'").fetchone()[0] == 12


def test_versions_from_system_info_forms() -> None:
    body = ("### System Info\n- `transformers` version: 4.35.2\n- Accelerate version: 1.7.0\n"
            "- PyTorch version (GPU?): 2.0.1+cu117 (True)\npeft==0.6.2\n")
    assert extract("t", body, "", REPO, False).versions == {
        "transformers": "4.35.2", "accelerate": "1.7.0", "torch": "2.0.1", "peft": "0.6.2"}


def test_dedup_fetches_the_target_repository_first_then_only_daily(fake_github: FakeGitHub, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    seed_server(fake_github, 30)
    db = str(tmp_path / "db.sqlite3")
    tb = tmp_path / "tb.txt"
    tb.write_text(SEED_TB, encoding="utf-8")
    assert main(["dedup", "--traceback", str(tb), "--repo", REPO, "--db", db, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["index_source"] == "index" and out["indexed_issues"] == 30
    assert out["notes"] == [f"{REPO}: 30 issue(s)/PR(s) fetched; 30 indexed"]
    # issue 5 carries this very traceback: found through the index the sync just filled
    assert out["results"][0]["number"] == 5
    listed = len(fake_github.requests_to("GET", r"^/repos/.*/issues$"))
    assert main(["dedup", "--traceback", str(tb), "--repo", REPO, "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == []      # synced less than a day ago
    assert len(fake_github.requests_to("GET", r"^/repos/.*/issues$")) == listed


def test_dedup_without_a_token_says_what_it_could_not_fetch(fake_github: FakeGitHub, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    seed_server(fake_github, 5)
    monkeypatch.delenv("GITHUB_TOKEN")
    tb = tmp_path / "tb.txt"
    tb.write_text(SEED_TB, encoding="utf-8")
    assert main(["dedup", "--traceback", str(tb), "--repo", REPO, "--db", str(tmp_path / "db.sqlite3")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{REPO}'s own issues were not fetched into the index: that needs a GitHub token" in out
    assert not fake_github.requests_to("GET", r"^/repos/.*/issues$")
    # the search still went out, unauthenticated
    searches = fake_github.requests_to("GET", r"^/search/issues$")
    assert searches and all(r.user is None for r in searches)
