"""Dedup against an index built from the labelled evaluation set (tests/data/issues_eval.json),
GitHub search through the local server, and the `dedup` command."""
from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.upstream.dedup import dedup, generic_message, query_of, search_phrase
from bot.issue.github import github_client
from bot.upstream.index import IssueIndex
from bot.upstream.failure import failure_from_text
from reducer.errors import ExitCode
from tests.fakegithub import FakeGitHub
from tests.test_route import make_repro, seed

ROOT = Path(__file__).resolve().parent.parent


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("route_dedup_eval", ROOT / "bench" / "route_dedup_eval.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()
EVAL = BENCH.load()


@pytest.fixture(scope="module")
def eval_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("idx") / "eval.sqlite3"
    BENCH.build_index(path, EVAL["issues"]).close()
    return path


@pytest.fixture
def index(eval_db: Path) -> Iterator[IssueIndex]:
    with IssueIndex.open(eval_db) as idx:
        yield idx


def refs(result: Any) -> list[str]:
    return [f"{r.repo}#{r.number}" for r in result.results]


def test_seed_finds_the_fixed_issue_and_its_fix(index: IssueIndex) -> None:
    failure = failure_from_text(seed("seed_is_hf_initialized"))
    failure.versions = {"accelerate": "1.13.0"}
    res = dedup(index, failure, target_repo="huggingface/accelerate")
    got = refs(res)
    assert {"huggingface/transformers#43872", "huggingface/accelerate#3976",
            "bitsandbytes-foundation/bitsandbytes#1900"} <= set(got)
    by = {f"{r.repo}#{r.number}": r for r in res.results}
    assert by["huggingface/transformers#43872"].likely_fixed_in == "accelerate 1.14"
    assert by["huggingface/transformers#43872"].state == "closed"
    assert "library frames match" in by["huggingface/transformers#43872"].reason
    assert by["huggingface/accelerate#3976"].is_pr
    assert len(res.results) <= 5 and all(0 < r.score <= 1 for r in res.results)
    assert [r.score for r in res.results] == sorted((r.score for r in res.results), reverse=True)


def test_no_likely_fix_when_the_user_already_has_it(index: IssueIndex) -> None:
    failure = failure_from_text(seed("seed_is_hf_initialized"))
    failure.versions = {"accelerate": "1.15.0"}
    res = dedup(index, failure)
    issue = next(r for r in res.results if r.number == 43872)
    assert issue.likely_fixed_in is None
    assert "regression" in issue.reason


def test_generic_message_is_told_apart_by_frames(index: IssueIndex) -> None:
    """Several issues share "Expected all tensors to be on the same device"; frames decide."""
    q = next(f for f in EVAL["failures"] if f["name"].startswith("LoRA over an 8-bit layer"))
    got = refs(dedup(index, BENCH.failure_of(q)))
    assert got[0] == "huggingface/peft#3169"
    for other in ("huggingface/peft#1277", "huggingface/transformers#28053", "huggingface/peft#776"):
        assert other not in got or got.index(other) > got.index("huggingface/peft#3169")
    q2 = next(f for f in EVAL["failures"] if f["name"].startswith("Llama embedding"))
    assert refs(dedup(index, BENCH.failure_of(q2)))[0] == "huggingface/peft#776"


def test_eval_figures_hold(index: IssueIndex) -> None:
    res = BENCH.evaluate(EVAL)
    assert res["routing"]["items"] >= 20
    assert res["routing"]["top1_accuracy"] >= 0.9
    assert res["dedup"]["recall@5"] >= 0.8 and res["dedup"]["precision@1"] >= 0.9
    assert res["dedup"]["confident_false_dup_rate"] == 0.0
    assert all(res["dedup"]["likely_fixed_in_ok"])


def test_eval_set_shape() -> None:
    issues = EVAL["issues"]
    assert len(issues) >= 30
    assert {i["repo"] for i in issues} == {"huggingface/transformers", "huggingface/peft", "huggingface/accelerate",
                                          "bitsandbytes-foundation/bitsandbytes"}
    keys = {f"{i['repo']}#{i['number']}" for i in issues}
    assert len(keys) == len(issues)
    for f in EVAL["failures"]:
        assert set(f.get("related", [])) | set(f.get("not_related", [])) <= keys, f["name"]
    generic = [i for i in issues if "Expected all tensors to be on the same device" in i.get("error", "")]
    assert len({i.get("group") for i in generic}) >= 3  # one message, several different bugs


def test_search_phrase_is_literal() -> None:
    q = query_of(failure_from_text(seed("seed_keyerror_22")))
    assert search_phrase(q) is None  # "KeyError: 22" is too generic to search for
    q = query_of(failure_from_text(seed("seed_is_hf_initialized")))
    assert search_phrase(q) == "Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized"


def test_github_search_adds_candidates(fake_github: FakeGitHub, index: IssueIndex) -> None:
    fake_github.add_repo("huggingface/accelerate")
    fake_github.add_issue("huggingface/accelerate", number=4001, title="PEFT load fails on 4-bit model",
                          body="TypeError: Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'")
    fake_github.add_issue("huggingface/accelerate", number=4002, title="unrelated", body="nothing")
    failure = failure_from_text(seed("seed_is_hf_initialized"))
    res = dedup(index, failure, target_repo="huggingface/accelerate", client=github_client())
    assert res.searched
    hit = next(r for r in res.results if r.number == 4001)
    assert "GitHub search" in hit.reason
    assert 4002 not in [r.number for r in res.results]
    searches = fake_github.requests_to("GET", r"^/search/issues$")
    assert len(searches) == 1
    q = searches[0].query["q"][0]
    assert '"Params4bit.__new__() got an unexpected keyword argument' in q and "repo:huggingface/accelerate" in q
    assert not [r for r in fake_github.requests if r.method != "GET"]  # never labels, closes or comments


def test_search_failure_does_not_fail_dedup(fake_github: FakeGitHub, index: IssueIndex) -> None:
    fake_github.fail_next("GET", r"^/search/issues$", 422, body={"message": "Validation Failed"})
    res = dedup(index, failure_from_text(seed("seed_is_hf_initialized")), client=github_client())
    assert not res.searched and res.search_note and "422" in res.search_note
    assert res.results  # the index still answered


def test_cli_dedup_repro_folder(tmp_path: Path, eval_db: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    folder = make_repro(tmp_path / "repros", seed("seed_is_hf_initialized"),
                        env={"packages": {"accelerate": {"installed": True, "version": "1.13.0"}}})
    assert main(["dedup", str(folder), "--db", str(eval_db)]) == 0
    out = capsys.readouterr().out
    assert "https://github.com/huggingface/transformers/issues/43872  (likely fixed in accelerate 1.14)" in out
    data = json.loads((folder / "related.json").read_text())
    first = data["results"][0]
    assert {"repo", "number", "title", "url", "state", "score", "reason", "likely_fixed_in", "is_pr"} <= set(first)
    assert any(r["likely_fixed_in"] == "accelerate 1.14" for r in data["results"])
    assert data["github_search"]["used"] is False


def test_cli_dedup_traceback_and_empty_index(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    tbf = tmp_path / "tb.txt"
    tbf.write_text(seed("seed_keyerror_22"))
    assert main(["dedup", "--traceback", str(tbf), "--db", str(tmp_path / "empty.sqlite3"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # An empty index: the known issues bundled with reprobot are searched instead, and said so.
    assert data["index_source"] == "bundled" and data["indexed_issues"] >= 300
    assert not (tmp_path / "empty.sqlite3").exists() or main(["index", "status", "--db", str(tmp_path / "empty.sqlite3"),
                                                              "--json"]) == 0
    capsys.readouterr()
    # `index seed` keeps them in the user's index, without a sync watermark.
    assert main(["index", "seed", "--db", str(tmp_path / "empty.sqlite3"), "--json"]) == 0
    seeded = json.loads(capsys.readouterr().out)
    assert seeded["added"] == seeded["total"] >= 300
    assert main(["index", "seed", "--db", str(tmp_path / "empty.sqlite3"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["added"] == 0
    from bot.upstream.index import IssueIndex
    with IssueIndex.open(tmp_path / "empty.sqlite3", create=False) as index:
        repos = index.repos()
    assert len(repos) == 4 and sum(r["n"] for r in repos) == seeded["total"]
    assert all(r["last_sync"] is None for r in repos)
    assert main(["dedup", "--traceback", str(tbf), "--db", str(tmp_path / "empty.sqlite3"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["index_source"] == "index"
    assert main(["dedup", "--traceback", str(tmp_path / "none.txt")]) == ExitCode.FILE_MISSING


def test_cli_dedup_reads_versions_from_a_pasted_post(eval_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    post = tmp_path / "post.txt"
    post.write_text("Versions: Transformers: v5.6.2 Accelerate: v1.13.0 Peft: v0.19.1\n\n"
                    + seed("seed_is_hf_initialized"))
    assert main(["dedup", "--traceback", str(post), "--db", str(eval_db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert any(r["likely_fixed_in"] == "accelerate 1.14" for r in data["results"])
    post.write_text("Versions: Accelerate: v1.15.0\n\n" + seed("seed_is_hf_initialized"))
    assert main(["dedup", "--traceback", str(post), "--db", str(eval_db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert not any(r["likely_fixed_in"] == "accelerate 1.14" for r in data["results"])


@pytest.mark.slow
def test_reduce_then_route_then_dedup_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A real failing script through `reduce --no-reduce` (a folder written by bot/store.py), then
    route and dedup read that folder as the CLI does."""
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    script = tmp_path / "cfg.py"
    script.write_text('from transformers import AutoConfig\n\nconfig = AutoConfig.for_model("no_such_model_type")\n')
    monkeypatch.chdir(tmp_path)
    assert main(["reduce", str(script), "--no-reduce", "--runs", "1", "--no-trace", "--out", "repros"]) == 0
    folder = next((tmp_path / "repros").iterdir())
    capsys.readouterr()
    assert main(["route", str(folder), "--json"]) == 0
    routed = json.loads(capsys.readouterr().out)
    assert routed["target"] == "huggingface/transformers" and routed["raised_in"] == "transformers"
    issues = tmp_path / "issues.json"
    issues.write_text(json.dumps([{
        "number": 1, "title": "for_model rejects my model type", "state": "open",
        "html_url": "https://github.com/huggingface/transformers/issues/1",
        "body": "```\nTraceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                "  File \"/usr/lib/python3/site-packages/transformers/models/auto/configuration_auto.py\", line 9,"
                " in for_model\nValueError: Unrecognized model identifier: other_type. Should contain one of a, b\n```"}]))
    db = str(tmp_path / "db.sqlite3")
    assert main(["index", "import", str(issues), "--db", db]) == 0
    capsys.readouterr()
    assert main(["dedup", str(folder), "--db", db, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["results"]
    assert found and found[0]["number"] == 1 and "library frames match" in found[0]["reason"]
    assert json.loads((folder / "related.json").read_text())["results"][0]["number"] == 1


def test_stock_wording_alone_is_not_a_likely_duplicate() -> None:
    from bot.prepare import likely_duplicate
    from bot.upstream.dedup import generic_message

    assert generic_message("'NoneType' object is not subscriptable")
    assert generic_message("Expected all tensors to be on the same device, but found at least two devices")
    assert not generic_message("module 'bitsandbytes.nn' has no attribute 'Linear4bit'")
    top = {"repo": "huggingface/peft", "number": 1, "score": 0.7, "reason": "same message",
           "components": {"message": 1.0}}
    same = {"results": [top], "query": {"message": "module 'bitsandbytes.nn' has no attribute 'Linear4bit'"}}
    assert likely_duplicate(same) is top
    stock = {"results": [top], "query": {"message": "maximum recursion depth exceeded"}}
    assert likely_duplicate(stock) is None
    # ...unless the frames agree down to the innermost one.
    framed = dict(top, reason="same message; 3 frames in common incl. the innermost")
    assert likely_duplicate({"results": [framed], "query": stock["query"]}) is framed


def test_stock_wording_is_not_a_likely_duplicate_whatever_the_calibrated_probability() -> None:
    """The calibrated model weighs the parts of a score; stock wording (Python's own
    ``'NoneType' object has no attribute 'shape'``) with no innermost frame in common is vetoed
    before it: two real peft issues with that message had different causes (pairs_train.jsonl)."""
    from bot.prepare import likely_duplicate
    from bot.upstream.calibration import model

    assert generic_message("'NoneType' object has no attribute 'shape'")
    assert not generic_message("'NoneType' object has no attribute 'cquantize_blockwise_fp16_nf4'")
    top = {"repo": "huggingface/peft", "number": 727, "score": 0.7, "reason": "same error message",
           "components": {"message": 0.45}, "duplicate_probability": 0.99}
    assert model() is not None
    stock = {"results": [top], "query": {"message": "'NoneType' object has no attribute 'shape'"}}
    assert likely_duplicate(stock) is None
    specific = {"results": [top], "query": {"message": "'NoneType' object has no attribute 'cquantize_blockwise'"}}
    assert likely_duplicate(specific) is top
    framed = dict(top, reason="same error message; 2/2 library frames match incl. the innermost (peft/x.py:f)")
    assert likely_duplicate({"results": [framed], "query": stock["query"]}) is framed


def test_the_bundled_issues_rank_the_same_message_above_words_of_the_frames(tmp_path: Path) -> None:
    """The README demo's failure (peft rejecting Gemma 4's ClippableLinear) against the bundled
    known issues: peft#2388, the same "Target module ... is not supported" on another model,
    comes first. Splitting the frames' function names into parts (``create``, ``new``,
    ``module``) once put an unrelated KeyError issue with peft frames above it."""
    from bot.upstream.seed import seed

    text = (Path(__file__).parent / "data" / "quick_lora_traceback.txt").read_text()
    with IssueIndex.open(tmp_path / "known.sqlite3") as index:
        seed(index)
        found = dedup(index, failure_from_text(text), target_repo="huggingface/peft").results
    assert (found[0].repo, found[0].number) == ("huggingface/peft", 2388)
