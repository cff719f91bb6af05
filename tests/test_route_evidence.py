"""Routing evidence beyond the frames (issue #13): API names on the user's line and in the
message, a pasted traceback cut at the user's call, an error line alone, and the nearest
failures of a real SQLite issue index voting for where they were filed or fixed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main
from bot.upstream.failure import failure_from_text
from bot.upstream.index import IssueIndex, import_file
from bot.upstream.neighbours import votes
from bot.upstream.route import api_owner, route

SAME_DEVICE = ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, "
               "cuda:0 and cpu! (when checking argument for argument mat2 in method wrapper_CUDA_mm)")


@pytest.mark.parametrize("text, owner", [
    ("model = PeftModel.from_pretrained(base, 'adapter')", "peft"),
    ("bnb.nn.Linear4bit(16, 16)", "bitsandbytes"),
    ("import bitsandbytes", "bitsandbytes"),
    ("accelerate launch train.py", "accelerate"),
    ("model = dispatch_model(model, device_map=dm)", "accelerate"),
    ("tok = AutoTokenizer.from_pretrained('x')", "transformers"),
    ("out = json.loads(text)", None),
])
def test_api_owner_names_the_package_of_a_call(text: str, owner: str | None) -> None:
    got = api_owner(text)
    assert (got[0] if got else None) == owner


def test_generic_words_in_a_message_name_nobody() -> None:
    # "tokenizer" and "generate" are plain English in messages; a class name is not.
    assert api_owner("the tokenizer could not generate text", in_message=True) is None
    assert api_owner("'Params4bit' object has no attribute 'absmax'", in_message=True)[0] == "bitsandbytes"


def test_an_error_line_alone_is_routed_by_the_names_in_its_message() -> None:
    f = failure_from_text("AttributeError: module 'bitsandbytes.nn' has no attribute 'Linear4bit'\n")
    assert f.record.exc_type == "AttributeError" and f.record.frames == ()
    r = route(f)
    assert r.target == "bitsandbytes-foundation/bitsandbytes"
    assert "message names bitsandbytes" in r.verdict


def test_an_error_line_without_names_gets_no_target_and_says_why() -> None:
    r = route(failure_from_text(SAME_DEVICE + "\n"))
    assert r.target is None and "not enough evidence" in r.verdict


def test_text_with_no_error_line_is_still_bad_input() -> None:
    from reducer.errors import ReprobotError

    for text in ("it crashed when I ran it\n", "UserWarning: torch_dtype is deprecated\n"):
        with pytest.raises(ReprobotError, match="no Python traceback"):
            failure_from_text(text)
    # A qualified exception class counts, and the last error line of a log is the failure.
    log = "ValueError: handled earlier\nstep 3\ntorch._dynamo.exc.Unsupported: call_function UserDefinedClassVariable\n"
    assert failure_from_text(log).record.exc_type == "torch._dynamo.exc.Unsupported"


def cut_at_user_line(line: str, error: str) -> str:
    """A pasted traceback that stops at the user's line (the library frames were not pasted)."""
    return f'Traceback (most recent call last):\n  File "/home/u/run.py", line 9, in <module>\n    {line}\n{error}\n'


def test_a_traceback_cut_at_the_users_call_credits_the_called_package() -> None:
    call = "model = PeftModel.from_pretrained(base, 'adapter')"
    r = route(failure_from_text(cut_at_user_line(call, "KeyError: 'base_model.model.lm_head'")))
    assert r.target == "huggingface/peft"
    assert "not pasted" in r.ranked[0]["reasons"][0]
    # ...but a NameError on that line is the user's own.
    r2 = route(failure_from_text(cut_at_user_line(call, "NameError: name 'base' is not defined")))
    assert r2.target is None


def test_a_class_named_in_the_message_outweighs_the_entry_call() -> None:
    r = route(failure_from_text(cut_at_user_line(
        "trainer.train()", "AttributeError: 'LoraModel' object has no attribute 'prepare_inputs_for_generation'")))
    assert r.target == "huggingface/peft"
    assert r.ranked[1]["repo"] == "huggingface/transformers"
    assert 0 < r.confidence < 1


def _issue(repo: str, number: int, title: str, error: str, thread: list[str] | None = None) -> dict:
    return {"url": f"https://api.github.com/repos/{repo}/issues/{number}",
            "repository_url": f"https://api.github.com/repos/{repo}",
            "html_url": f"https://github.com/{repo}/issues/{number}", "number": number, "title": title,
            "body": f"### Reproduction\n\n```\n{error}\n```", "state": "closed", "state_reason": "completed",
            "labels": [], "comments": len(thread or []), "created_at": "2025-03-01T12:00:00Z",
            "updated_at": "2025-03-01T12:00:00Z", "closed_at": "2025-03-02T12:00:00Z",
            "user": {"login": "reporter"}, "reprobot_thread": thread or []}


@pytest.fixture
def index_db(tmp_path: Path) -> Path:
    issues = [
        _issue("huggingface/peft", 501, "same device error in LoRA forward", SAME_DEVICE),
        _issue("huggingface/peft", 502, "device mismatch after get_peft_model", SAME_DEVICE.replace("cuda:0", "cuda:3")),
        _issue("huggingface/accelerate", 77, "device error with device_map",
               SAME_DEVICE, thread=["fixed by huggingface/transformers#4242"]),
        _issue("huggingface/transformers", 9, "tokenizer fails", "ValueError: unrelated tokenizer error"),
    ]
    dump = tmp_path / "issues.json"
    dump.write_text(json.dumps(issues), encoding="utf-8")
    db = tmp_path / "index.sqlite3"
    with IssueIndex.open(db) as index:
        import_file(index, dump)
    return db


def test_neighbours_vote_for_where_similar_failures_were_filed_or_fixed(index_db: Path) -> None:
    failure = failure_from_text(SAME_DEVICE + "\n")
    with IssueIndex.open(index_db, create=False) as index:
        got = {v.repo: v for v in votes(index, failure)}
        # accelerate#77 was fixed in transformers: its vote goes where the fix landed.
        assert set(got) == {"huggingface/peft", "huggingface/transformers"}
        assert got["huggingface/peft"].share > got["huggingface/transformers"].share
        assert sorted(got["huggingface/peft"].refs) == ["peft#501", "peft#502"]
        r = route(failure, index=index)
    assert r.target == "huggingface/peft" and "similar failures were filed" in r.verdict
    # An issue is never its own neighbour when the index says so (the evaluation's leave-one-out).
    with IssueIndex.open(index_db, create=False) as index:
        index.excluded = ("huggingface/peft", 501)
        refs = [ref for v in votes(index, failure) for ref in v.refs]
    assert "peft#501" not in refs and "peft#502" in refs


def test_route_command_reads_the_index_when_there_is_one(index_db: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    tb = tmp_path / "tb.txt"
    tb.write_text(SAME_DEVICE + "\n", encoding="utf-8")
    assert main(["route", "--traceback", str(tb), "--db", str(index_db), "--json"]) == 0
    with_index = json.loads(capsys.readouterr().out)
    assert with_index["target"] == "huggingface/peft" and with_index["confidence"] > 0
    assert main(["route", "--traceback", str(tb), "--db", str(index_db), "--no-index", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"] is None
    # No index file: routing still works, and no file is created.
    missing = tmp_path / "none.sqlite3"
    assert main(["route", "--traceback", str(tb), "--db", str(missing), "--json"]) == 0
    assert not missing.exists()
