"""Routing: the seeds' conclusions reached from their tracebacks, "not one of ours" said plainly,
and the `route` command on a repro folder and on a pasted traceback."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bot.cli import main
from bot.upstream.failure import failure_from_text
from bot.upstream.route import TARGETS, maintainers, route
from bot.store import ReproDir, write_json_atomic
from reducer.errors import ExitCode
from reducer.failure.signature import MatchOptions, signature_of
from reducer.failure.tracebacks import parse_tracebacks

DATA = Path(__file__).parent / "data" / "tracebacks"
GEMMA_REPRO = """import torch
from transformers import BitsAndBytesConfig, Gemma4ForConditionalGeneration
from peft import PeftModel

base = Gemma4ForConditionalGeneration.from_pretrained(
    "tiny", quantization_config=BitsAndBytesConfig(load_in_4bit=True), device_map={"model.vision_tower": "cpu", "": 0})
model = PeftModel.from_pretrained(base, "adapter")
"""


def seed(name: str) -> str:
    return (DATA / f"{name}.txt").read_text(encoding="utf-8")


def tb(frames: list[str], error: str, call: str = "main()") -> str:
    lines = ["Traceback (most recent call last):", '  File "/home/u/work/run.py", line 3, in <module>', f"    {call}"]
    for i, f in enumerate(frames):
        rel, func = f.rsplit(":", 1)
        lines.append(f'  File "/home/u/venv/lib/python3.11/site-packages/{rel}", line {10 + i}, in {func}')
    return "\n".join(lines + [error]) + "\n"


def test_is_hf_initialized_goes_to_the_caller_accelerate() -> None:
    r = route(failure_from_text(seed("seed_is_hf_initialized")))
    assert r.target == "huggingface/accelerate"
    assert r.raised_in == "accelerate"
    assert r.boundary and "Params4bit" in r.boundary and "_is_hf_initialized" in r.boundary
    assert set(r.cross_links) == {"huggingface/peft", "bitsandbytes-foundation/bitsandbytes"}
    assert "caller owns" in r.verdict
    assert r.who_can_help == ["@SunMarc"]
    assert r.who_can_help_by_repo["huggingface/peft"] == ["@BenjaminBossan", "@githubnemo"]
    assert r.who_can_help_by_repo["bitsandbytes-foundation/bitsandbytes"][0] == "@matthewdouglas"
    assert r.ranked[0]["repo"] == "huggingface/accelerate" and r.ranked[0]["reasons"]


def test_keyerror_22_goes_to_transformers_with_the_model_family() -> None:
    r = route(failure_from_text(seed("seed_keyerror_22")))
    assert r.target == "huggingface/transformers"
    assert r.model_family == "gemma4"
    assert r.entry_point == "model.generate"
    assert set(r.cross_links) == {"huggingface/peft", "huggingface/accelerate"}
    assert r.who_can_help[0] == "@zucchini-nlp"  # gemma4 is a multimodal family
    assert r.areas[0] == "model family: gemma4"


def test_meta_tensor_pasted_vs_repro_folder() -> None:
    pasted = failure_from_text(seed("seed_meta_tensor"))
    r = route(pasted)
    # The forum mangled "torch\_meta_registrations.py"; it is still torch, and bitsandbytes made the call.
    assert r.raised_in == "torch"
    assert r.target == "bitsandbytes-foundation/bitsandbytes"
    assert r.entry_point == "PeftModel.from_pretrained"
    pasted.repro_source = GEMMA_REPRO
    r2 = route(pasted)
    # With the repro, the model is a transformers model that crosses 4 packages: the seed's triage.
    assert r2.target == "huggingface/transformers"
    # torch raised: it is named as a cross-link too
    assert set(r2.cross_links) == {"huggingface/peft", "huggingface/accelerate",
                                   "bitsandbytes-foundation/bitsandbytes", "pytorch/pytorch"}
    assert "integration" in r2.verdict
    assert "quantization" in r2.areas


@pytest.mark.parametrize("frames, error, owner", [
    (["transformers/models/auto/auto_factory.py:from_pretrained", "huggingface_hub/file_download.py:hf_hub_download",
      "huggingface_hub/utils/_http.py:hf_raise_for_status"],
     "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo", "huggingface/huggingface_hub"),
    (["transformers/models/llama/modeling_llama.py:forward", "torch/nn/modules/linear.py:forward"],
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", None),
    # torch's own machinery, but reached through transformers: transformers' maintainers triage it.
    (["transformers/modeling_utils.py:forward", "torch/_dynamo/eval_frame.py:_fn",
      "torch/_inductor/compile_fx.py:compile_fx"],
     "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: AssertionError: ", "pytorch/pytorch"),
])
def test_not_one_of_ours(frames: list[str], error: str, owner: str | None) -> None:
    r = route(failure_from_text(tb(frames, error)))
    assert r.target is None
    assert r.verdict.startswith("not one of ours")
    assert r.who_can_help == []
    if owner:
        assert owner in r.verdict


def test_users_own_code_is_not_ours() -> None:
    text = ("Traceback (most recent call last):\n  File \"/home/u/run.py\", line 9, in <module>\n    main()\n"
            "  File \"/home/u/run.py\", line 5, in post\n    return labels[ids[0]]\nKeyError: 22\n")
    r = route(failure_from_text(text))
    assert r.target is None and r.raised_in == "user code"


def test_torch_raise_is_owned_by_the_package_that_made_the_call() -> None:
    text = tb(["peft/peft_model.py:forward", "peft/tuners/lora/layer.py:forward", "torch/nn/modules/linear.py:forward"],
              "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x8)")
    r = route(failure_from_text(text))
    assert r.target == "huggingface/peft"
    assert any("made the failing torch call" in x for x in r.ranked[0]["reasons"])


def test_maintainers_file_is_the_source_of_mentions() -> None:
    data = maintainers()
    assert set(data["repos"]) == set(TARGETS.values())
    handles = {h for repo in data["repos"].values() for hs in [repo["default"], *repo["areas"].values()] for h in hs}
    assert all(h.startswith("@") and " " not in h for h in handles)
    r = route(failure_from_text(seed("seed_keyerror_22")))
    assert set(r.who_can_help) <= handles


def make_repro(root: Path, text: str, repro: str = "print('x')\n", env: dict | None = None) -> Path:
    record = parse_tracebacks(text)[-1]
    sig = signature_of(record, MatchOptions())
    d = ReproDir.create(Path("worker.py"), sig, root)
    write_json_atomic(d.signature_json, {"signature": sig.to_dict(), "options": MatchOptions().to_dict(),
                                         "record": record.to_dict(), "script": "worker.py", "args": []})
    d.repro.write_text(repro)
    d.traceback_txt.write_text(record.text)
    if env is not None:
        write_json_atomic(d.env_json, env)
    return d.path


def test_cli_route_repro_folder_writes_route_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = make_repro(tmp_path / "repros", seed("seed_meta_tensor"), GEMMA_REPRO)
    assert main(["route", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "huggingface/transformers" in out and "who can help" in out
    data = json.loads((folder / "route.json").read_text())
    assert {"target", "ranked", "cross_links", "who_can_help", "entry_point", "raised_in", "verdict"} <= set(data)
    assert data["target"] == "huggingface/transformers"
    assert str(tmp_path) not in json.dumps(data)  # no local paths stored
    assert main(["route", str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"] == "huggingface/transformers"


def test_cli_route_pasted_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(seed("seed_is_hf_initialized")))
    assert main(["route", "--traceback", "-", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"] == "huggingface/accelerate"


def test_cli_route_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    junk = tmp_path / "post.txt"
    junk.write_text("my model is broken, please help\n")
    assert main(["route", "--traceback", str(junk)]) == ExitCode.BAD_INPUT
    assert main(["route", "--traceback", str(tmp_path / "nope.txt")]) == ExitCode.FILE_MISSING
    assert main(["route", str(tmp_path)]) == ExitCode.BAD_INPUT  # not a repro folder
    assert main(["route"]) == ExitCode.USAGE
    assert main(["route", str(tmp_path), "--traceback", str(junk)]) == ExitCode.USAGE


def test_editable_source_checkout_frames_are_library_frames() -> None:
    text = ("Traceback (most recent call last):\n  File \"/home/u/run.py\", line 3, in <module>\n"
            "    model = AutoModelForCausalLM.from_pretrained('x')\n"
            "  File \"/mnt/w/transformers/src/transformers/modeling_utils.py\", line 4005, in from_pretrained\n"
            "  File \"/mnt/w/transformers/src/transformers/core_model_loading.py\", line 952, in convert\n"
            "TypeError: Parameter.__new__() got an unexpected keyword argument '_is_hf_initialized'\n")
    r = route(failure_from_text(text))
    assert r.target == "huggingface/transformers" and r.raised_in == "transformers"
    assert r.boundary and "torch" in r.boundary


ORIGINAL_VIA_PEFT = """Traceback (most recent call last):
  File "/home/u/train.py", line 9, in <module>
    model = get_peft_model(base, config)
  File "/venv/lib/python3.11/site-packages/peft/mapping.py", line 12, in get_peft_model
    return PeftModel(model, config)
  File "/venv/lib/python3.11/site-packages/transformers/modeling_utils.py", line 40, in resize_token_embeddings
    raise ValueError("new_num_tokens must be positive")
ValueError: new_num_tokens must be positive
"""
REPRO_DIRECT = """Traceback (most recent call last):
  File "/tmp/x/repro.py", line 3, in <module>
    model.resize_token_embeddings(0)
  File "/venv/lib/python3.11/site-packages/transformers/modeling_utils.py", line 40, in resize_token_embeddings
    raise ValueError("new_num_tokens must be positive")
ValueError: new_num_tokens must be positive
"""


def test_cross_links_come_from_the_repros_own_run(tmp_path: Path) -> None:
    """The original went through peft; the reduced repro calls transformers directly. Routing a
    repro folder reads the repro's recorded run, so peft is neither cross-linked nor mentioned."""
    from bot.upstream.failure import failure_from_repro

    original = parse_tracebacks(ORIGINAL_VIA_PEFT)[0]
    folder = tmp_path / "repro"
    folder.mkdir()
    sig = signature_of(original, MatchOptions())
    write_json_atomic(folder / "signature.json", {"signature": sig.to_dict(), "record": original.to_dict()})
    (folder / "repro.py").write_text("from transformers import AutoModel\nmodel = AutoModel.from_config(cfg)\n"
                                     "model.resize_token_embeddings(0)\n")
    before = route(failure_from_repro(folder))
    assert "huggingface/peft" in before.cross_links + ([before.target] if before.target else [])
    write_json_atomic(folder / "reduction.json", {"status": "done",
                                                  "repro_record": parse_tracebacks(REPRO_DIRECT)[0].to_dict()})
    after = route(failure_from_repro(folder))
    assert after.target == "huggingface/transformers"
    assert "huggingface/peft" not in after.cross_links and "huggingface/peft" not in after.who_can_help_by_repo


def _with_lines(frames: list[tuple[str, str]], error: str, call: str) -> str:
    """A traceback whose library frames show their source lines (as a real run prints them)."""
    lines = ["Traceback (most recent call last):", '  File "/home/u/work/run.py", line 3, in <module>', f"    {call}"]
    for i, (where, line) in enumerate(frames):
        rel, func = where.rsplit(":", 1)
        lines += [f'  File "/home/u/venv/lib/python3.11/site-packages/{rel}", line {10 + i}, in {func}', f"    {line}"]
    return "\n".join(lines + [error]) + "\n"


_SAVE_REFUSED = "ValueError: You are trying to save a non contiguous tensor: `q.weight` which is not allowed."


def test_a_check_outside_the_stack_refusing_what_a_package_of_ours_handed_it_goes_to_that_package() -> None:
    # transformers' save_pretrained handed safetensors a non-contiguous tensor and safetensors' own
    # check refused it: the value was transformers' to make (its fix), not safetensors' bug
    frames = [("transformers/trainer.py:save_model", "self._save(output_dir)"),
              ("transformers/modeling_utils.py:save_pretrained", "safe_save_file(shard, path)"),
              ("safetensors/torch.py:save_file", "serialize_file(_flatten(tensors), filename)"),
              ("safetensors/torch.py:_tobytes", "raise ValueError(")]
    r = route(failure_from_text(_with_lines(frames, _SAVE_REFUSED, call="trainer.save_model()")))
    assert r.target == "huggingface/transformers", r.verdict
    assert "transformers (transformers/modeling_utils.py:save_pretrained) handed safetensors" in r.verdict
    # not a check (an internal failure raised further in), or the user's own hand-off: no such reading
    crash = frames[:-1] + [("safetensors/torch.py:_tobytes", "return data.numpy().tobytes()")]
    direct = [("safetensors/torch.py:save_file", "serialize_file(_flatten(tensors), filename)"),
              ("safetensors/torch.py:_tobytes", "raise ValueError(")]
    for other, call in ((crash, "trainer.save_model()"), (direct, "save_file(state, 'x.safetensors')")):
        r = route(failure_from_text(_with_lines(other, _SAVE_REFUSED, call=call)))
        assert not any("handed safetensors" in reason for c in r.ranked for reason in c["reasons"]), r.verdict
    assert route(failure_from_text(_with_lines(direct, _SAVE_REFUSED, call="save_file(state, 'x')"))).target is None


def test_torchs_own_object_missing_its_private_state_is_torchs_even_when_the_user_made_the_call() -> None:
    # ReduceLROnPlateau.get_last_lr() before the first step() read self._last_lr, which torch sets up
    # itself: whoever called it, torch failed; a public attribute the user's object lacks, or a
    # private one read off the caller's value (not self), stays with the user's call
    error = "AttributeError: 'ReduceLROnPlateau' object has no attribute '_last_lr'. Did you mean: 'get_last_lr'?"
    call = "scheduler.get_last_lr()"
    own = [("torch/optim/lr_scheduler.py:get_last_lr", "return self._last_lr")]
    r = route(failure_from_text(_with_lines(own, error, call=call)))
    assert r.target == "pytorch/pytorch", r.verdict
    assert "lacks the private state its method reads (self._last_lr" in r.verdict
    public = "AttributeError: 'Linear' object has no attribute 'weights'"
    for frames, err in ((own, public), ([("torch/nn/modules/module.py:forward", "return x._last_lr")], error)):
        r = route(failure_from_text(_with_lines(frames, err, call=call)))
        assert r.target is None and "user's code made the failing torch call" in r.verdict, r.verdict


def test_a_lookup_a_package_outside_the_stack_refused_goes_to_the_package_of_ours_that_asked() -> None:
    # trl's formatting function asked a datasets row for a column it does not have: the lookup is
    # trl's; the same KeyError asked for by the user's own code is not ours
    frames = ["trl/trainer/sft_trainer.py:__init__", "datasets/arrow_dataset.py:map",
              "trl/trainer/sft_trainer.py:<lambda>", "datasets/formatting/formatting.py:__getitem__"]
    r = route(failure_from_text(tb(frames, "KeyError: 'text'", call="SFTTrainer(model, train_dataset=ds)")))
    assert r.target == "huggingface/trl", r.verdict
    assert any("asked datasets for what it does not hold" in reason for c in r.ranked for reason in c["reasons"])
    direct = tb(["datasets/formatting/formatting.py:__getitem__"], "KeyError: 'text'", call="row['text']")
    assert route(failure_from_text(direct)).target is None
