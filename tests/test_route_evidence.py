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


def test_a_paste_cut_below_a_call_of_unknown_code_is_not_blamed_on_the_users_line(tmp_path: Path) -> None:
    """Python shows the frame of every Python function a line calls: a paste ending at a user's
    line that calls something was cut there. The user's line is weak evidence, so the index's
    knowledge of where such failures go can name a repository; a line that raises by itself, or a
    traceback reprobot ran whole, is still the user's."""
    from dataclasses import replace

    from bot.prepare import route_with_index

    cut = failure_from_text(cut_at_user_line("outputs = model(**inputs)", SAME_DEVICE))
    alone = route(cut)
    assert alone.target is None and "were not pasted" in alone.ranked[0]["reasons"][0]
    assert alone.ranked[0]["score"] == 1.0
    assert route_with_index(cut, db="/nonexistent/index.sqlite3").target is not None
    own = route(failure_from_text(cut_at_user_line("x = batch['labels']", "KeyError: 'labels'")))
    assert own.target is None and "raised in the user's own code" in own.verdict
    whole = route(replace(cut, repro_dir=tmp_path))
    assert whole.target is None and "raised in the user's own code" in whole.verdict


@pytest.mark.parametrize("line, target", [("import transformers", "huggingface/transformers"),
                                          ("from peft.tuners.lora import LoraLayer", "huggingface/peft")])
def test_a_paste_cut_at_an_import_of_ours_credits_the_imported_package(line: str, target: str) -> None:
    """Importing a package runs its code: the frames below the import line were cut."""
    error = "AttributeError: module 'torch.utils._pytree' has no attribute 'register_pytree_node'"
    r = route(failure_from_text(cut_at_user_line(line, error)))
    assert r.target == target and "stops at the user's call into" in r.verdict
    r2 = route(failure_from_text(cut_at_user_line("import numpy", error)))
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
    return _indexed(tmp_path, "index", issues)


def _indexed(tmp_path: Path, name: str, issues: list[dict]) -> Path:
    """``issues`` (REST issue objects) imported into a new SQLite index, as `index import` does."""
    dump = tmp_path / f"{name}.json"
    dump.write_text(json.dumps(issues), encoding="utf-8")
    db = tmp_path / f"{name}.sqlite3"
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


# --- the index's model of where failures with these words go (bot/upstream/prior.py) -----------

def _words_index(tmp_path: Path, extra: list[dict] | None = None) -> Path:
    """Thirty indexed failures in three repositories, each repository with its own words."""
    words = {"huggingface/peft": "adapter lora_A rank target_modules",
             "bitsandbytes-foundation/bitsandbytes": "quant_state absmax blocksize Params4bit",
             "huggingface/accelerate": "offload_dir dispatch hooks device_map"}
    issues = [_issue(repo, 100 + i, f"issue {i}", f"RuntimeError: failure number {i} about {w}")
              for repo, w in words.items() for i in range(10)] + (extra or [])
    return _indexed(tmp_path, "words", issues)


def test_the_prior_weighs_a_failures_words_against_each_repository(tmp_path: Path) -> None:
    from bot.upstream.prior import features, prior_of

    feats = features("torch.OutOfMemoryError", "the lora_A weight of rank 8",
                     ["peft/tuners/lora/layer.py:forward"])
    assert {"exc:OutOfMemoryError", "lora_a", "lora", "rank", "pkg:peft", "dir:peft/tuners",
            "file:peft/tuners/lora/layer.py"} <= feats
    with IssueIndex.open(_words_index(tmp_path), create=False) as index:
        model = prior_of(index)
        assert model.size == 30
        shares = model.shares(features("ValueError", "no absmax in quant_state"))
        assert next(iter(shares)) == "bitsandbytes-foundation/bitsandbytes"
        assert abs(sum(shares.values()) - 1) < 1e-9
        # Words nobody indexed: the repositories' sizes alone, an even split here.
        flat = model.shares(features("ValueError", "zzz qqq"))
        assert max(flat.values()) - min(flat.values()) < 1e-9


def test_a_left_out_issue_does_not_vote_for_itself(tmp_path: Path) -> None:
    from bot.upstream.prior import features, prior_of

    lone = _issue("huggingface/peft", 999, "lone", "RuntimeError: frobnicate_widget exploded")
    with IssueIndex.open(_words_index(tmp_path, [lone]), create=False) as index:
        model = prior_of(index)
        query = features("RuntimeError", "frobnicate_widget exploded")
        with_it = model.shares(query)
        without = model.shares(query, excluded=("huggingface/peft", 999))
    assert with_it["huggingface/peft"] > without["huggingface/peft"]
    assert without["huggingface/peft"] < 0.4


def test_a_small_index_has_no_model(index_db: Path) -> None:
    from bot.upstream.prior import features, prior_of

    with IssueIndex.open(index_db, create=False) as index:
        assert prior_of(index).shares(features("RuntimeError", "same device")) == {}


def test_an_error_line_alone_gets_a_target_from_the_bundled_known_issues() -> None:
    """A message with no frames and no API names routes by where failures with its words were
    filed among the issues bundled with reprobot (torch's wording, filed at peft as a LoRA dtype bug)."""
    from bot.prepare import route_with_index

    failure = failure_from_text("RuntimeError: expected mat1 and mat2 to have the same dtype, but got: "
                                "float != c10::Half\n")
    assert route(failure).target is None
    r = route_with_index(failure, db="/nonexistent/index.sqlite3")
    assert r.target == "huggingface/peft"
    assert any("index's model" in reason for c in r.ranked for reason in c["reasons"])


def test_torch_raising_under_our_frames_names_the_package_that_called_it() -> None:
    """torch raised, and its frames outweigh ours, but the failure is inside the stack: the package
    of ours with the most evidence gets it, torch is cross-linked. torch's own compiler raising
    stays torch's (test_route.test_not_one_of_ours)."""
    text = ("Traceback (most recent call last):\n"
            '  File "run.py", line 3, in <module>\n    out = model(x)\n'
            '  File "/env/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1, in _call_impl\n'
            '  File "/env/lib/python3.11/site-packages/peft/tuners/lora/layer.py", line 2, in forward\n'
            '  File "/env/lib/python3.11/site-packages/einops/einops.py", line 3, in rearrange\n'
            '  File "/env/lib/python3.11/site-packages/torch/_tensor.py", line 5, in __torch_function__\n'
            "RuntimeError: shape '[2, 8, 4]' is invalid for input of size 60\n")
    r = route(failure_from_text(text))
    assert r.ranked[0]["repo"] == "pytorch/pytorch"      # torch has the most evidence ...
    assert r.target == "huggingface/peft"               # ... but peft's code is on the path
    assert "pytorch/pytorch" in r.cross_links and "reached through peft" in r.verdict
