"""Bug, usage error or environment (issue #30): the classifier on representative failures, the
draft's Expected behavior for a usage error, the preview's first line, and --submit refusing a
usage error without --anyway (real `reduce` runs of a fake `peft`; a local fake GitHub)."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from bot.cli import main
from bot.upstream.failure import failure_from_text
from bot.upstream.kind import (BUG, ENVIRONMENT, USAGE, Evidence, classify, evidence_from_record, frames_from_strings,
                               kind_line)
from reducer.errors import ExitCode
from tests.fakegithub import FakeGitHub
from tests.test_file_flow import reprobot, write

SITE = "/home/u/venv/lib/python3.11/site-packages"
GREEDY = ("Greedy methods (do_sample != True) without beam search do not support `num_return_sequences` "
          "different than 1 (got 3).")


def _traceback(user_line: str, frames: list[tuple[str, str, str]], error: str) -> str:
    lines = ["Traceback (most recent call last):", '  File "repro.py", line 5, in <module>', f"    {user_line}"]
    for n, (rel, func, line) in enumerate(frames, 10):
        lines += [f'  File "{SITE}/{rel}", line {n}, in {func}', f"    {line}"]
    return "\n".join(lines + [error]) + "\n"


def _kind(text: str, passes_with: list[str] = ()) -> object:
    failure = failure_from_text(text)
    return classify(evidence_from_record(failure.record, passes_with=passes_with))


GENERATE = [("transformers/generation/utils.py", "generate", "generation_config, model_kwargs = self._prepare_generation_config(generation_config, **kwargs)"),
            ("transformers/generation/utils.py", "_prepare_generation_config", "model_kwargs = generation_config.update(**kwargs)"),
            ("transformers/generation/configuration_utils.py", "update", "self.validate(user_set_attributes=set(to_remove))"),
            ("transformers/generation/configuration_utils.py", "validate", "raise ValueError(")]


def test_num_return_sequences_with_greedy_decoding_is_a_usage_error() -> None:
    text = _traceback("out = model.generate(ids, do_sample=False, num_return_sequences=3)", GENERATE,
                      f"ValueError: {GREEDY}")
    k = _kind(text)
    assert k.kind == USAGE and "deliberate check" in k.reason and "validate" in k.reason
    # contrast found the keyword whose removal makes it pass: that is the fix, said with confidence
    k = _kind(text, ["without `num_return_sequences=3` (the default)"])
    assert k.kind == USAGE and k.fix == "without `num_return_sequences=3` (the default)" and k.confidence >= 0.9
    assert kind_line(k, ["without `num_return_sequences=3` (the default)"]).startswith(
        "This looks like a usage error: ") and "It passes with: without `num_return_sequences=3`" in kind_line(k)


def test_the_error_line_alone_is_read_through_the_raise_site_catalogue() -> None:
    # A paste cut above the library frames: the catalogue says transformers raises it in `validate`.
    k = classify(Evidence("ValueError", GREEDY))
    assert k.kind == USAGE and "configuration_utils.py:validate" in k.reason


def test_a_meta_tensor_item_inside_accelerate_is_a_bug() -> None:
    text = _traceback("model = load_checkpoint_and_dispatch(model, path, device_map='auto')",
                      [("accelerate/big_modeling.py", "load_checkpoint_and_dispatch", "load_checkpoint_in_model("),
                       ("accelerate/utils/modeling.py", "load_checkpoint_in_model", "if value.abs().max().item() > 0:")],
                      "RuntimeError: Tensor.item() cannot be called on meta tensors")
    assert _kind(text).kind == BUG


def test_a_missing_bitsandbytes_is_the_environment() -> None:
    text = _traceback("import bitsandbytes as bnb", [], "ModuleNotFoundError: No module named 'bitsandbytes'")
    k = _kind(text)
    assert k.kind == ENVIRONMENT and "ModuleNotFoundError" in k.reason
    assert classify(Evidence("RuntimeError", "CUDA error: no kernel image is available for execution on the "
                                             "device")).kind == ENVIRONMENT
    assert "environment problem" in kind_line(k) and "reinstall" in kind_line(k)


@pytest.mark.parametrize("exc,message,frames,user_line", [
    # a "not supported" deep in library internals: a real bug in the labelled set (peft#2388)
    ("ValueError", "Target module Qwen2_5_VisionTransformerPretrainedModel is not supported. Currently, only the "
                   "following modules are supported: `torch.nn.Linear`.",
     ["peft/mapping.py:get_peft_model", "peft/tuners/lora/model.py:_create_new_module"], "get_peft_model(model, config)"),
    # a deliberate check with a remedy, reached through another package's call on the user's behalf
    ("ValueError", "`.to` is not supported for `4-bit` or `8-bit` bitsandbytes models. Please use the model as it is, "
                   "since the model has already been set to the correct devices and casted to the correct `dtype`.",
     ["transformers/modeling_utils.py:from_pretrained", "accelerate/big_modeling.py:dispatch_model",
      "transformers/modeling_utils.py:to"], "AutoModelForCausalLM.from_pretrained(mid, device_map='cuda:0')"),
    # Python rejecting a keyword that library code passed on
    ("TypeError", "Linear.forward() got an unexpected keyword argument 'lora_scale'",
     ["torch/nn/modules/module.py:_call_impl", "peft/tuners/lora/layer.py:forward"], "unet(x)"),
    ("KeyError", "'input_ids'", ["peft/peft_model.py:prepare_inputs_for_generation"], "model.generate(**batch)"),
])
def test_deliberate_looking_raises_inside_the_library_stay_bugs(exc, message, frames, user_line) -> None:
    assert classify(Evidence(exc, message, frames_from_strings(frames), user_line, whole=True)).kind == BUG


def test_a_keyword_the_users_own_call_does_not_take_is_usage() -> None:
    k = classify(Evidence("TypeError", "Trainer.__init__() got an unexpected keyword argument 'fp16'"))
    assert k.kind == USAGE and "fp16" in (k.fix or "")
    # a config class that does not know a saved field: written by another release
    assert classify(Evidence("TypeError", "LoraConfig.__init__() got an unexpected keyword argument "
                                          "'layer_replication'")).kind == ENVIRONMENT


@pytest.mark.parametrize("exc,message,frames,user_line,want", [
    # a plainly stated constraint on an error line alone (trl's GRPO divisibility rule)
    ("ValueError", "The global train batch size (1 x 1) must be evenly divisible by the number of generations per "
                   "prompt (8).", [], "GRPOTrainer", USAGE),
    # addressing the caller is not enough without a constraint: this one was a bug (peft#414)
    ("ValueError", "You can't train a model that has been loaded in 8-bit precision on multiple devices.", [], None, BUG),
    # the caller's own line asks for an attribute the object lacks; the library only forwards the lookup
    ("AttributeError", "'PeftModelForCausalLM' object has no attribute 'chat'",
     ["peft/tuners/lora/model.py:__getattr__", "torch/nn/modules/module.py:__getattr__"], "model.chat(tok, q)", USAGE),
    # the same message shape from deeper library code stays a bug
    ("AttributeError", "'GRPOTrainer' object has no attribute 'current_gradient_accumulation_steps'",
     ["trl/trainer/grpo_trainer.py:_compute_loss"], "trainer.train()", BUG),
    # a module of the stack lacking a name: the installed release
    ("AttributeError", "module 'bitsandbytes.nn' has no attribute 'Linear8bitLt'", [], None, ENVIRONMENT),
    # the caller constructs the config itself: the keyword is theirs
    ("TypeError", "LoraConfig.__init__() got an unexpected keyword argument 'use_original_init'", [],
     "LoraConfig(r=16, use_original_init=False)", USAGE),
    # the caller calls the method the signature error names
    ("TypeError", "PeftModelForSeq2SeqLM.generate() takes 1 positional argument but 2 were given", [],
     "model.generate(input_ids)", USAGE),
    # a keyword passed by the Trainer, not by the caller's line
    ("TypeError", "forward() got an unexpected keyword argument 'num_items_in_batch'", [], "trainer.train()", BUG),
    # the rejected call is in the library's own example script
    ("TypeError", "Accelerator.__init__() got an unexpected keyword argument 'logging_dir'", [],
     "accelerate launch examples/megatron_lm_gpt_pretraining.py", BUG),
    # a loader naming the caller's repo id as lacking its files
    ("OSError", "TheBloke/Llama-2-7B-GGML does not appear to have a file named config.json.",
     ["transformers/modeling_utils.py:from_pretrained"], "AutoModel.from_pretrained(mid)", USAGE),
])
def test_rules_from_the_train_part(exc, message, frames, user_line, want) -> None:
    assert classify(Evidence(exc, message, frames_from_strings(frames), user_line)).kind == want


def test_expected_behavior_for_a_usage_error_does_not_claim_the_call_should_complete() -> None:
    from bot.issue.draft import _expected
    record = failure_from_text(f"ValueError: {GREEDY}").record
    usage = _expected("model.generate", record, None, "usage")
    assert "should complete" not in usage and "a clearer error message, or documented behaviour" in usage
    assert "should complete" in _expected("model.generate", record, None, "bug")


# --- the CLI: a real reduce of a script whose fake peft rejects a config on purpose -----------

FAKE_PEFT = {
    "peft/__init__.py": "from peft.config import LoraConfig\nfrom peft.mapping import get_peft_model\n",
    "peft/config.py": """
        class LoraConfig:
            def __init__(self, r=8, target_modules=None, use_dora=False, layers_pattern=None):
                self.r = r
                self.target_modules = list(target_modules or [])
                self.use_dora = use_dora
                self.layers_pattern = layers_pattern
                self.__post_init__()

            def __post_init__(self):
                if self.use_dora and self.layers_pattern is not None:
                    raise ValueError("DoRA does not support `layers_pattern` (got "
                                     f"{self.layers_pattern!r}); pass one or the other.")
    """,
    "peft/mapping.py": """
        def get_peft_model(model, config):
            return model
    """,
}

SCRIPT = """
    from peft import LoraConfig, get_peft_model

    SETTINGS = {"rank": 8, "targets": ["q_proj", "v_proj"]}


    def main():
        print("settings:", SETTINGS)
        model = {"q_proj": "Linear", "v_proj": "Linear"}
        config = LoraConfig(r=SETTINGS["rank"], target_modules=SETTINGS["targets"], use_dora=True,
                            layers_pattern="layers")
        get_peft_model(model, config)


    main()
"""


@pytest.fixture(scope="module")
def usage_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("kindflow")
    site = work.parent / (work.name + "-venv") / "lib" / "python3" / "site-packages"
    for rel, text in FAKE_PEFT.items():
        write(site / rel, text)
    write(work / "dora_job.py", SCRIPT)
    env = {"PYTHONPATH": f"{Path(__file__).resolve().parents[1]}{os.pathsep}{site}"}
    proc = reprobot("reduce", "dora_job.py", "--out", "repros", "--no-env", "--max-time", "240", cwd=work, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (folder,) = (work / "repros").iterdir()
    proc = reprobot("contrast", str(folder), cwd=work, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return folder


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("REPROBOT_GITHUB_API", raising=False)
    monkeypatch.setenv("REPROBOT_INDEX_DB", str(tmp_path / "index.db"))
    monkeypatch.setenv("REPROBOT_OFFLINE", "1")
    return tmp_path


def _copy(folder: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "repros" / folder.name
    shutil.copytree(folder, dest)
    return dest


def test_preview_says_usage_error_first_and_submit_needs_anyway(
        usage_folder: Path, offline: Path, fake_github: FakeGitHub, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy(usage_folder, offline)
    # --submit runs the repro once more where it failed: with the fake peft importable.
    work = usage_folder.parent.parent
    site = work.parent / (work.name + "-venv") / "lib" / "python3" / "site-packages"
    monkeypatch.setenv("PYTHONPATH", f"{Path(__file__).resolve().parents[1]}{os.pathsep}{site}")
    fake_github.add_repo("huggingface/peft")
    assert main(["file", str(folder), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    line = "This looks like a usage error: a deliberate check in peft/config.py:__post_init__ rejected the input"
    assert line in out, out
    # the change that makes it pass, as contrast found it: dropping one of the two keywords the rule joins
    assert re.search(r"It passes with: without `(use_dora=True|layers_pattern='layers')` \(the default\)", out), out
    assert out.index(line) < out.index("issue preview")          # said first
    assert "--submit refuses unless --anyway is given" in out
    draft = json.loads((folder / "draft-peft.json").read_text())
    assert draft["kind"]["kind"] == USAGE
    body = (folder / "draft-peft.md").read_text()
    expected = body.split("### Expected behavior", 1)[1].split("###", 1)[0]
    assert "should complete" not in expected and "rejects this input on purpose" in expected
    # --submit refuses a usage error, with or without --yes ...
    assert main(["file", str(folder), "--submit", "--yes", "--not-a-duplicate"]) == ExitCode.USAGE
    err = " ".join(capsys.readouterr().err.split())
    assert "not filed: This looks like a usage error" in err and "--anyway" in err
    assert not fake_github.issues["huggingface/peft"]
    # ... and files it when the person says so
    assert main(["file", str(folder), "--submit", "--yes", "--not-a-duplicate", "--anyway"]) == 0
    assert len(fake_github.issues["huggingface/peft"]) == 1


# --- the real stack: a tiny GPT-2 built from a config (no download) ---------------------------

GPT2_SCRIPT = """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    SETTINGS = {"layers": 2, "heads": 2, "width": 32}


    def build():
        config = GPT2Config(n_layer=SETTINGS["layers"], n_head=SETTINGS["heads"], n_embd=SETTINGS["width"],
                            vocab_size=100, n_positions=64)
        torch.manual_seed(0)
        return GPT2LMHeadModel(config).eval()


    def main():
        model = build()
        ids = torch.tensor([[1, 2, 3, 4]])
        print("prompt", ids.shape)
        out = model.generate(ids, max_new_tokens=4, do_sample=False, num_return_sequences=3, pad_token_id=0)
        print(out)


    main()
"""


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None,
                    reason="needs torch and transformers")
def test_reduce_and_preview_of_greedy_generate_with_three_sequences(tmp_path: Path) -> None:
    write(tmp_path / "gen_many.py", GPT2_SCRIPT)
    env = {"REPROBOT_OFFLINE": "1", "REPROBOT_INDEX_DB": str(tmp_path / "index.db")}
    proc = reprobot("reduce", "gen_many.py", "--out", "repros", "--no-env", "--max-time", "300", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (folder,) = (tmp_path / "repros").iterdir()
    proc = reprobot("file", "--dry-run", str(folder), cwd=tmp_path, env=env)
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    line = "This looks like a usage error: a deliberate check in transformers/generation/configuration_utils.py:validate"
    assert line in out and out.index(line) < out.index("issue preview"), out[:3000]
    body = (folder / "draft-transformers.md").read_text()
    expected = body.split("### Expected behavior", 1)[1].split("###", 1)[0]
    assert "should complete" not in expected and "a clearer error message" in expected, expected


GRAD = "element 0 of tensors does not require grad and does not have a grad_fn"


def test_torchs_own_checks_of_the_callers_graph_are_usage_errors_only_when_torch_raised_them() -> None:
    backward = [("torch/_tensor.py", "backward", "torch.autograd.backward("),
                ("torch/autograd/__init__.py", "backward", "_engine_run_backward(")]
    k = _kind(_traceback("loss.backward()", backward, f"RuntimeError: {GRAD}"))
    assert k.kind == USAGE and "enable_input_require_grads" in (k.fix or "")
    # the same words raised by a stack library's own frame: the library's code, not torch's check
    peft_frame = [("peft/tuners/lora/model.py", "_forward_hook", "raise RuntimeError(msg)")]
    assert _kind(_traceback("model(x)", peft_frame, f"RuntimeError: {GRAD}")).kind == BUG
    # an error line alone (no frames) is read as torch's check too
    assert classify(Evidence("RuntimeError", "one of the variables needed for gradient computation has been "
                                             "modified by an inplace operation")).kind == USAGE


@pytest.mark.parametrize("exc, message", [
    ("TypeError", "cat() received an invalid combination of arguments - got (Tensor, Tensor, out=Tensor), but "
                  "expected one of:"),
    ("TypeError", "expected Tensor as element 0 in argument 0, but got list"),
    ("IndexError", "Target 117 is out of bounds."),
    ("IndexError", "index out of range in self"),
    ("RuntimeError", "Expected 4-dimensional input for 4-dimensional weight [64, 1, 3, 3], but got 5-dimensional "
                     "input of size [1, 1, 128, 128, 128] instead"),
])
def test_torchs_checks_of_the_callers_inputs_are_usage_errors(exc, message) -> None:
    embedding = [("torch/nn/modules/sparse.py", "forward", "return F.embedding("),
                 ("torch/nn/functional.py", "embedding", "return torch.embedding(")]
    assert classify(Evidence(exc, message)).kind == USAGE
    assert _kind(_traceback("model(ids)", embedding, f"{exc}: {message}")).kind == USAGE
    # an IndexError of the library's own list is not torch's check
    assert classify(Evidence("IndexError", "list index out of range")).kind == BUG


# --- what the releases' signatures say (bot/data/signatures.json.gz, the committed catalogue) ------

def test_a_keyword_no_release_ever_took_is_the_callers_typo_with_the_near_name() -> None:
    k = classify(Evidence("TypeError", "Accelerator.__init__() got an unexpected keyword argument 'kwargs_handler'",
                          user_line="acc = Accelerator(kwargs_handler=[handler])"))
    assert k.kind == USAGE and k.fix == "did you mean `kwargs_handlers`?" and "no release of accelerate" in k.reason


def test_a_keyword_of_other_releases_reads_against_the_installed_one() -> None:
    newer = Evidence("TypeError", "LoraConfig.__init__() got an unexpected keyword argument 'eva_config'",
                     user_line="config = LoraConfig(r=8, eva_config=eva)", installed={"peft": "0.10.0"})
    k = classify(newer)
    assert k.kind == ENVIRONMENT and k.fix == "upgrade peft to 0.14.0 or later"
    older = Evidence("TypeError", "Accelerator.__init__() got an unexpected keyword argument 'logging_dir'",
                     user_line="acc = Accelerator(logging_dir='runs')", installed={"accelerate": "1.10.1"})
    k = classify(older)
    assert k.kind == USAGE and "up to accelerate 0.18.0" in k.reason and "older release" in k.reason


def test_one_package_passing_another_a_keyword_its_release_dropped_is_the_environment() -> None:
    frames = [("transformers/trainer.py", "__init__", "self.create_accelerator_and_postprocess()"),
              ("transformers/trainer.py", "create_accelerator_and_postprocess", "self.accelerator = Accelerator(**args)")]
    k = _kind(_traceback("trainer = Trainer(model=model, args=args)", frames,
                         "TypeError: Accelerator.__init__() got an unexpected keyword argument 'dispatch_batches'"))
    assert k.kind == ENVIRONMENT and k.reason.startswith("transformers passes `dispatch_batches` to Accelerator")
    # a package's call into its own code that no longer fits is not read as a version mismatch
    own = [("peft/peft_model.py", "from_pretrained", "model.load_adapter(model_id, low_cpu_mem_usage=True)")]
    k = _kind(_traceback("model = PeftModel.from_pretrained(base, path)", own,
                         "TypeError: PeftModelForSequenceClassification.load_adapter() got an unexpected keyword "
                         "argument 'low_cpu_mem_usage'"))
    assert k.kind != ENVIRONMENT or "passes" not in k.reason


def test_importing_a_name_from_the_wrong_package_is_usage_a_removed_one_environment() -> None:
    k = classify(Evidence("ImportError", "cannot import name 'TrainingArguments' from 'trl' (<env>/trl/__init__.py)"))
    assert k.kind == USAGE and k.fix == "import TrainingArguments from transformers"
    gone = classify(Evidence("ImportError", "cannot import name 'top_k_top_p_filtering' from 'transformers'"))
    assert gone.kind == ENVIRONMENT


def test_installed_versions_come_from_the_repros_env_json(tmp_path) -> None:
    from bot.store import ReproDir
    from bot.upstream.kind import classify_repro
    record = failure_from_text("TypeError: LoraConfig.__init__() got an unexpected keyword argument 'eva_config'\n").record
    (tmp_path / "signature.json").write_text(json.dumps({"record": record.to_dict()}))
    (tmp_path / "env.json").write_text(json.dumps({"packages": {"peft": {"installed": True, "version": "0.10.0"},
                                                                "trl": {"installed": False}}}))
    k = classify_repro(ReproDir.open(tmp_path))
    assert k is not None and k.kind == ENVIRONMENT and k.fix == "upgrade peft to 0.14.0 or later"


def test_a_rule_stated_in_the_constructor_of_the_class_the_caller_builds_is_a_usage_error() -> None:
    init = [("trl/trainer/ppo_trainer.py", "__init__", "raise ValueError(")]
    error = ("ValueError: model must be a PreTrainedModelWrapper, got <class 'transformers.models.codegen."
             "modeling_codegen.CodeGenForCausalLM'> - supported architectures are: ('AutoModelForCausalLMWithValueHead',)")
    assert _kind(_traceback("trainer = PPOTrainer(config, model, ref_model, tokenizer)", init, error)).kind == USAGE
    # the same raise reached from a call that builds nothing of that class: not the caller's constructor
    assert _kind(_traceback("trainer.step(queries, responses, rewards)", init, error)).kind == BUG


def test_a_checkpoint_naming_a_class_the_installed_transformers_lacks_is_the_environment() -> None:
    k = classify(Evidence("ValueError", "Tokenizer class LLaMATokenizer does not exist or is not currently imported."))
    assert k.kind == ENVIRONMENT


# --- the caller's data or model class does not fit what it is fed to (round 5, from train misses) --

@pytest.mark.parametrize("key", ["input_ids", "labels", "chosen"])
def test_a_batch_without_a_standard_field_is_the_callers_data(key) -> None:
    collate = [("transformers/trainer.py", "train", "return inner_training_loop("),
               ("transformers/data/data_collator.py", "__call__", f"batch = [f['{key}'] for f in features]")]
    k = _kind(_traceback("trainer.train()", collate, f"KeyError: '{key}'"))
    assert k.kind == USAGE and key in k.reason and "remove_unused_columns" in (k.fix or "")
    # a key that is no batch field (a registry's, a cache's) stays the library's own lookup
    assert _kind(_traceback("trainer.train()", collate, "KeyError: 'sliding_attention'")).kind == BUG
    assert classify(Evidence("KeyError", "22")).kind == BUG


def test_no_loss_from_the_model_says_labels_or_a_head() -> None:
    k = classify(Evidence("KeyError", "'loss'", user_line="trainer.train()"))
    assert k.kind == USAGE and "labels" in (k.fix or "")


def test_labels_given_to_a_base_model_is_usage_other_rejected_fields_are_not() -> None:
    k = classify(Evidence("TypeError", "LlamaModel.forward() got an unexpected keyword argument 'labels'",
                          user_line="trainer.train()"))
    assert k.kind == USAGE and "ForCausalLM" in (k.fix or "")
    # the library passing its own keyword on to models that do not take it (a Trainer regression)
    assert classify(Evidence("TypeError", "forward() got an unexpected keyword argument 'num_items_in_batch'",
                             user_line="trainer.train()")).kind == BUG
    assert classify(Evidence("TypeError", "LlamaModel.forward() got an unexpected keyword argument "
                                          "'token_type_ids'")).kind == BUG
    k = classify(Evidence("TypeError", "ChatGLMForConditionalGeneration.forward() got an unexpected keyword "
                                       "argument 'decoder_input_ids'"))
    assert k.kind == USAGE and "CAUSAL_LM" in (k.fix or "")


def test_a_device_side_assert_is_the_callers_indices_unless_a_stack_library_raised_it() -> None:
    k = classify(Evidence("RuntimeError", "CUDA error: device-side assert triggered"))
    assert k.kind == USAGE and "CUDA_LAUNCH_BLOCKING" in (k.fix or "")
    bnb = [("bitsandbytes/functional.py", "dequantize_4bit", "lib.cdequantize_blockwise_bf16_nf4(")]
    assert _kind(_traceback("model(x)", bnb, "RuntimeError: CUDA error: device-side assert triggered")).kind == BUG


def test_inputs_on_another_device_are_the_callers_when_the_caller_drives_the_step() -> None:
    message = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    linear = [("torch/nn/modules/linear.py", "forward", "return F.linear(input, self.weight, self.bias)")]
    k = _kind(_traceback("out = model(batch)", linear, f"RuntimeError: {message}"))
    assert k.kind == USAGE and "model.device" in (k.fix or "")
    # the library's own loop places the tensors: a mismatch there is its job
    assert _kind(_traceback("trainer.train()", linear, f"RuntimeError: {message}")).kind == BUG
    # raised by a stack library's frame (accelerate's hooks): not the caller's placement
    hook = [("accelerate/hooks.py", "pre_forward", "raise RuntimeError(msg)")]
    assert _kind(_traceback("out = model(batch)", hook, f"RuntimeError: {message}")).kind == BUG


@pytest.mark.parametrize("exc, message, fix_word", [
    ("ValueError", "Unrecognized configuration class <class 'transformers.models.distilbert.configuration_distilbert."
                   "DistilBertConfig'> for this kind of AutoModel: AutoModelForCausalLM.", "Auto class"),
    ("ValueError", "Some specified arguments are not used by the HfArgumentParser: ['--use_lora']", "dataclass"),
    ("ValueError", "The model did not return a loss from the inputs, only the following keys: logits.", "labels"),
    ("RuntimeError", '"addmm_impl_cpu_" not implemented for \'Half\'', "float32"),
    ("RuntimeError", 'Error(s) in loading state_dict for Net: unexpected key "module.conv1.weight" in state_dict',
     "module."),
])
def test_a_librarys_own_words_for_the_wrong_class_or_arguments_are_usage(exc, message, fix_word) -> None:
    k = classify(Evidence(exc, message))
    assert k.kind == USAGE and fix_word in (k.fix or ""), k


def test_torchs_dtype_check_raised_by_a_stack_librarys_frame_stays_a_bug() -> None:
    bnb = [("bitsandbytes/autograd/_functions.py", "forward", "raise RuntimeError(msg)")]
    error = "RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'"
    assert _kind(_traceback("model(x)", bnb, error)).kind == BUG


def test_a_usage_verdict_gives_way_when_versions_found_an_earlier_release_that_passes(tmp_path) -> None:
    """A deliberate check that rejects what an earlier release accepted is a regression: the
    labelled set's bugs include exactly these (a model_kwargs check that began rejecting
    `length`, a docstring example that stopped working)."""
    from bot.store import ReproDir
    from bot.upstream.kind import classify_repro
    error = "ValueError: You have to specify pixel_values\n"
    record = failure_from_text(error).record
    (tmp_path / "signature.json").write_text(json.dumps({"record": record.to_dict()}))
    (tmp_path / "env.json").write_text(json.dumps({"packages": {"transformers": {"installed": True,
                                                                                 "version": "4.18.0"}}}))
    assert classify_repro(ReproDir.open(tmp_path)).kind == USAGE
    verdict = lambda kind: {"kind": kind, "signature": None, "message": ""}   # noqa: E731
    (tmp_path / "versions.json").write_text(json.dumps({"rows": [
        {"label": "locked", "versions": {"transformers": "4.18.0"}, "changed": {}, "verdict": verdict("same failure")},
        {"label": "transformers latest", "versions": {"transformers": "4.19.0"}, "changed": {"transformers": "4.19.0"},
         "verdict": verdict("same failure")}],
        "bisect": {"package": "transformers", "first_changed": "4.18.0", "sentence": "first fails: transformers 4.18.0",
                   "tried": [{"version": "4.17.0", "verdict": verdict("PASS")},
                             {"version": "4.18.0", "verdict": verdict("same failure")}]}}))
    k = classify_repro(ReproDir.open(tmp_path))
    assert k.kind == BUG and "4.17.0" in k.reason and "regression" in k.reason
    # a later release of a package that neither raised it nor was routed to: still usage
    later = lambda dist, v: json.dumps({"rows": [   # noqa: E731
        {"label": f"{dist} latest", "versions": {dist: v}, "changed": {dist: v}, "verdict": verdict("PASS")}]})
    (tmp_path / "versions.json").write_text(later("transformers", "4.19.0"))
    assert classify_repro(ReproDir.open(tmp_path)).kind == USAGE
    # routed to transformers, whose later release passes with nothing else changed: the library changed
    # under the same call, read as a bug fixed there (the costly mistake is the other way round)
    (tmp_path / "route.json").write_text(json.dumps({"target": "huggingface/transformers"}))
    (tmp_path / "versions.json").write_text(json.dumps({"rows": [
        {"label": "transformers latest", "versions": {"transformers": "4.19.0"}, "changed": {"transformers": "4.19.0"},
         "verdict": verdict("PASS")}]}))
    k = classify_repro(ReproDir.open(tmp_path))
    assert k.kind == BUG and "transformers 4.19.0" in k.reason and "fix shipped" in k.reason
    # an earlier release passing is still the regression it was
    (tmp_path / "versions.json").write_text(later("transformers", "4.17.0"))
    assert "regression" in classify_repro(ReproDir.open(tmp_path)).reason


@pytest.mark.parametrize("exc, message, fix_word", [
    ("ValueError", "Expected more than 1 value per channel when training, got input size torch.Size([1, 128])", "eval"),
    ("RuntimeError", "view size is not compatible with input tensor's size and stride (at least one dimension spans "
                     "across two contiguous subspaces). Use .reshape(...) instead.", "reshape"),
    ("RuntimeError", "Expected object of type Variable[torch.FloatTensor] but found type "
                     "Variable[torch.cuda.FloatTensor] for argument #1 'mat2'", "device"),
    ("TypeError", "expected Variable as element 0 in argument 0, but got tuple", "forms"),
])
def test_more_of_torchs_checks_of_the_callers_inputs(exc, message, fix_word) -> None:
    k = classify(Evidence(exc, message))
    assert k.kind == USAGE and fix_word in (k.fix or ""), k


def test_a_bare_init_signature_error_without_frames_is_not_called_usage() -> None:
    """Python before 3.10 wrote `__init__() got an unexpected keyword argument`: no class, so no
    release can be read; the labelled set has it as a release mismatch and as a library's own example
    as often as a typo. With the class named (or the caller's line calling it), it stays usage."""
    bare = "__init__() got an unexpected keyword argument 'evaluation_strategy'"
    assert classify(Evidence("TypeError", bare)).kind == BUG
    named = "Blip2Processor.__init__() got an unexpected keyword argument 'num_query_tokenz'"
    assert classify(Evidence("TypeError", named)).kind == USAGE


def test_an_unconfirmed_usage_verdict_says_how_to_confirm_it() -> None:
    k = classify(Evidence("KeyError", "'input_ids'", user_line="trainer.train()"))
    assert k.kind == USAGE
    assert kind_line(k).endswith("No run has confirmed it: `reprobot contrast` tries the repro without each "
                                 "argument the caller passed, and with each option of the failing call it left at "
                                 "its default.")
    confirmed = classify(Evidence("ValueError", GREEDY, frames_from_strings([f"{r}:{f}" for r, f, _ in GENERATE]),
                                  "model.generate(ids, do_sample=False, num_return_sequences=3)",
                                  passes_with=["without `num_return_sequences=3` (the default)"], whole=True))
    assert "It passes with" in kind_line(confirmed) and "No run has confirmed" not in kind_line(confirmed)


def test_an_environment_verdict_gives_way_when_versions_found_the_release_that_fixed_it(tmp_path) -> None:
    """A later release of the package that raised it passes, with nothing else the failure touches
    changed: a fix shipped there, so the failure was that package's bug, not the install's. The
    pass does not count when the run also changed a package the failure names or has frames in."""
    from bot.store import ReproDir
    from bot.upstream.kind import classify_repro
    text = _traceback("from peft import get_peft_model",
                      [("peft/__init__.py", "<module>", "from .mapping import get_peft_model"),
                       ("peft/utils/save_and_load.py", "<module>", "from transformers import shard_checkpoint")],
                      f"ImportError: cannot import name 'shard_checkpoint' from 'transformers' ({SITE}/transformers/__init__.py)")
    (tmp_path / "signature.json").write_text(json.dumps({"record": failure_from_text(text).record.to_dict()}))
    (tmp_path / "env.json").write_text(json.dumps({"packages": {
        "peft": {"installed": True, "version": "0.13.0"}, "transformers": {"installed": True, "version": "4.47.0"}}}))
    assert classify_repro(ReproDir.open(tmp_path)).kind == ENVIRONMENT
    verdict = lambda kind: {"kind": kind, "signature": None, "message": ""}   # noqa: E731

    def bisect(package: str, passing: str, also: dict | None = None, later: tuple[str, ...] = ()) -> None:
        tried = [{"version": "0.13.0", "verdict": verdict("same failure")},
                 *({"version": v, "verdict": verdict("PASS")} for v in later),
                 {"version": passing, "verdict": verdict("PASS"), **({"also": also} if also else {})}]
        (tmp_path / "versions.json").write_text(json.dumps({"rows": [], "bisect": {
            "package": package, "first_changed": passing, "first_passing": passing,
            "sentence": f"first passing: {package} {passing}", "tried": tried}}))

    bisect("peft", "0.13.2", later=("0.15.0",))
    k = classify_repro(ReproDir.open(tmp_path))
    # the reason names the earliest passing release: where the fix shipped
    assert k.kind == BUG and "peft 0.13.2" in k.reason and "fix shipped" in k.reason
    # its environment also installed another transformers, which the failure names: not a clean pass
    bisect("peft", "0.13.2", also={"transformers": "4.48.0"})
    assert classify_repro(ReproDir.open(tmp_path)).kind == ENVIRONMENT
    # a requirement the failure does not touch changed beside it: still the fix's
    bisect("peft", "0.13.2", also={"safetensors": "0.4.5"})
    assert classify_repro(ReproDir.open(tmp_path)).kind == BUG
    # an earlier release passing is no fix
    bisect("peft", "0.12.0")
    assert classify_repro(ReproDir.open(tmp_path)).kind == ENVIRONMENT
    # a later release of a package that neither raised it nor was routed to
    (tmp_path / "versions.json").write_text(json.dumps({"rows": [
        {"label": "accelerate latest", "versions": {}, "changed": {"accelerate": "1.2.0"}, "verdict": verdict("PASS")}]}))
    assert classify_repro(ReproDir.open(tmp_path)).kind == ENVIRONMENT
    # ... unless routing picked it
    (tmp_path / "env.json").write_text(json.dumps({"packages": {
        "peft": {"installed": True, "version": "0.13.0"}, "accelerate": {"installed": True, "version": "1.0.0"}}}))
    (tmp_path / "route.json").write_text(json.dumps({"target": "huggingface/accelerate"}))
    assert classify_repro(ReproDir.open(tmp_path)).kind == BUG


def test_a_method_of_other_releases_the_callers_line_asks_for_reads_against_the_installed_one() -> None:
    """``'Accelerator' object has no attribute 'save_model'`` from the caller's own line: the
    releases' catalogue has the method from a later release than the installed one (environment:
    upgrade), or only up to an earlier one (usage: written for an older release). A method every
    release has, a library frame asking, or a class the catalogue does not know leave it to the
    other rules."""
    def ev(message: str, line: str, installed: dict, frames=()) -> Evidence:
        return Evidence("AttributeError", message, frames_from_strings(frames), user_line=line, installed=installed)

    later = ev("'Accelerator' object has no attribute 'save_model'", "accelerator.save_model(model, out_dir)",
               {"accelerate": "0.20.3"})
    k = classify(later)
    assert k.kind == ENVIRONMENT and k.fix == "upgrade accelerate to 0.23.0 or later" and "0.20.3 is installed" in k.reason
    # on the installed release that has it the lookup is the caller's own (the existing rule)
    assert classify(ev(later.message, later.user_line, {"accelerate": "1.15.0"})).kind == USAGE
    # a library frame asking for it: two releases that do not go together, not the caller's line
    by_library = ev(later.message, "trainer.train()", {"accelerate": "0.20.3"},
                    ["transformers/trainer.py:save_model"])
    assert classify(by_library).kind == BUG
    # a class the catalogue does not know
    assert classify(ev("'MyTrainer' object has no attribute 'save_model'", "t.save_model()",
                       {"accelerate": "0.20.3"})).kind == USAGE


def test_a_verdict_read_from_the_releases_record_of_the_callers_call_is_not_overruled_by_runs(tmp_path) -> None:
    """An environment verdict that says "upgrade to X" is what a later release passing confirms: the
    fix-shipped rule, which turns other environment verdicts into bugs, leaves it alone."""
    from bot.store import ReproDir
    from bot.upstream.kind import classify_repro
    text = _traceback("accelerator.save_model(model, out_dir)", [],
                      "AttributeError: 'Accelerator' object has no attribute 'save_model'")
    (tmp_path / "signature.json").write_text(json.dumps({"record": failure_from_text(text).record.to_dict()}))
    (tmp_path / "env.json").write_text(json.dumps({"packages": {"accelerate": {"installed": True, "version": "0.20.3"}}}))
    (tmp_path / "route.json").write_text(json.dumps({"target": "huggingface/accelerate"}))
    (tmp_path / "versions.json").write_text(json.dumps({"rows": [
        {"label": "accelerate latest", "versions": {}, "changed": {"accelerate": "1.15.0"},
         "verdict": {"kind": "PASS", "signature": None, "message": ""}}]}))
    k = classify_repro(ReproDir.open(tmp_path))
    assert k.kind == ENVIRONMENT and k.fix == "upgrade accelerate to 0.23.0 or later"
    # the same run does turn an environment verdict of another rule into a bug (the control)
    text = _traceback("from accelerate import Accelerator", [("accelerate/__init__.py", "<module>", "from .x import y")],
                      "ImportError: cannot import name 'y' from 'accelerate.x'")
    (tmp_path / "signature.json").write_text(json.dumps({"record": failure_from_text(text).record.to_dict()}))
    assert classify_repro(ReproDir.open(tmp_path)).kind == BUG


def test_a_later_pass_the_users_script_did_not_confirm_weighs_against_the_error_alone_not_a_run(tmp_path) -> None:
    """A latest row where the reduced repro passed and the user's script, run there too, failed:
    the recorded way, it is no fix at all; another way (the script's own drift), it is unconfirmed:
    it still turns a usage verdict read from the error alone into a bug (bug when unsure), but not
    one that a contrast change passing on the installed release confirmed."""
    from bot.store import ReproDir
    from bot.upstream.kind import classify_repro
    record = failure_from_text("ValueError: You have to specify pixel_values\n").record
    (tmp_path / "signature.json").write_text(json.dumps({"record": record.to_dict()}))
    (tmp_path / "env.json").write_text(json.dumps({"packages": {"transformers": {"installed": True,
                                                                                 "version": "4.18.0"}}}))
    (tmp_path / "route.json").write_text(json.dumps({"target": "huggingface/transformers"}))

    def latest(original: str | None) -> None:
        (tmp_path / "versions.json").write_text(json.dumps({"rows": [
            {"label": "transformers latest", "versions": {"transformers": "5.0.0"},
             "changed": {"transformers": "5.0.0"}, "verdict": {"kind": "PASS"},
             "original": {"kind": original, "detail": "ImportError: needs accelerate"} if original else None}]}))

    def kind() -> str:
        return classify_repro(ReproDir.open(tmp_path)).kind

    latest("same failure")
    assert kind() == USAGE                      # the user's problem is still there: no fix
    latest("different failure")
    assert kind() == BUG                        # unconfirmed, against the error's wording alone
    latest(None)
    assert kind() == BUG                        # not run there (an older versions.json): a pass
    # contrast ran the failing call with one of its options set and it passed on the installed release
    (tmp_path / "contrast.json").write_text(json.dumps({"changes": [
        {"line": 3, "change": "with `do_resize=True` (an option of preprocess() the call did not set)",
         "verdict": {"kind": "PASS"}}], "runs": 2, "handback": []}))
    latest("different failure")
    assert kind() == USAGE                      # the run outweighs a pass the user's script did not confirm
    latest("PASS")
    assert kind() == BUG                        # a confirmed pass still does


LEAF = "RuntimeError: a leaf Variable that requires grad is being used in an in-place operation."


def test_a_runtime_error_naming_the_option_contrast_dropped_is_usage() -> None:
    # torch's autograd check names the in-place operation the call asked for with inplace=True, and
    # contrast ran the call without it: it passed. Without that run, or where the dropped keyword is
    # not what the message names, nothing says the caller's option was the cause: bug.
    text = _traceback("out = F.relu(x, inplace=True)", [("torch/nn/functional.py", "relu", "result = torch.relu_(input)")],
                      LEAF)
    k = _kind(text, ["without `inplace=True` (the default)"])
    assert k.kind == USAGE and k.fix == "without `inplace=True` (the default)", k
    assert "naming `inplace`" in k.reason
    assert _kind(text).kind == BUG
    assert _kind(text, ["without `beta=2.0` (the default)"]).kind == BUG


EVAL_STEP = [("transformers/trainer.py", "evaluate", "eval_dataloader = self.get_eval_dataloader(eval_dataset)"),
             ("transformers/trainer.py", "get_eval_dataloader",
              'raise ValueError("Trainer: evaluation requires an eval_dataset.")')]


def test_a_library_raise_the_call_avoids_without_a_keyword_it_passed_is_usage() -> None:
    # the library's own `raise ValueError("...")` and contrast ran the call without a keyword the caller
    # set: it passed (transformers-33721's shape). The message names neither keyword.
    text = _traceback('trainer.train()', EVAL_STEP, "ValueError: Trainer: evaluation requires an eval_dataset.")
    passing = ["without `args=TrainingArguments(output_dir='out', evaluation_strategy=\"epoch\")` (the default)",
               'without `evaluation_strategy="epoch"` (the default)']
    k = _kind(text, passing)
    assert k.kind == USAGE and k.confidence == 0.7, k
    # of the two changes, the one that names a single setting is the fix
    assert k.fix == 'without `evaluation_strategy="epoch"` (the default)'
    assert _kind(text).kind == BUG                                     # no run: the raise alone is not enough
    # a builtin failing inside the library (no `raise` of its own on that line) stays a bug, run or not
    builtin = _traceback("out = model.generate(ids, stop_strings=['a'])",
                         [("transformers/generation/stopping_criteria.py", "_stop_string_create_embedding_vec",
                           "max_valid_positions = max(len(val) for val in token_valid_positions.values())")],
                         "ValueError: max() arg is an empty sequence")
    assert _kind(builtin, ["without `stop_strings=['a']` (the default)"]).kind == BUG


def test_pickle_refusing_a_function_the_script_defined_inside_another_is_usage() -> None:
    source = ("import torch\n\ndef attach_grad_monitor(model):\n    model.register_forward_hook(lambda *a: None)\n"
              "    return model\n\ntorch.save(attach_grad_monitor(torch.nn.Linear(2, 2)), 'm.pt')\n")
    frames = [("torch/serialization.py", "save", "_save(obj, opened_zipfile, pickle_module, pickle_protocol)"),
              ("torch/serialization.py", "_save", "pickler.dump(obj)")]
    text = _traceback("torch.save(attach_grad_monitor(torch.nn.Linear(2, 2)), 'm.pt')", frames,
                      "AttributeError: Can't pickle local object 'attach_grad_monitor.<locals>.<lambda>'")
    record = failure_from_text(text).record
    k = classify(evidence_from_record(record, repro_source=source))
    assert k.kind == USAGE and "attach_grad_monitor" in k.reason and "module level" in k.fix, k
    # the same refusal of a library's own local function is that library's bug
    library = text.replace("attach_grad_monitor.<locals>", "Categorical.__init__.<locals>")
    assert classify(evidence_from_record(failure_from_text(library).record, repro_source=source)).kind == BUG
    # a lambda of the script's own module, refused by a worker process's pickling
    main_lambda = _traceback("for batch in loader: pass",
                             [("torch/utils/data/dataloader.py", "__iter__", "return self._get_iterator()")],
                             "_pickle.PicklingError: Can't pickle <function <lambda> at 0x7f00>: attribute lookup "
                             "<lambda> on __main__ failed")
    assert _kind(main_lambda).kind == USAGE


def test_a_literal_the_library_uses_as_another_type_is_usage() -> None:
    # the caller passes device_map as a string; the function reads it as a dict (accelerate-985's shape)
    frames = [("accelerate/big_modeling.py", "dispatch_model", "check_device_map(model, device_map)"),
              ("accelerate/utils/modeling.py", "check_device_map", "for module_name in device_map.keys():")]
    error = "AttributeError: 'str' object has no attribute 'keys'"
    k = _kind(_traceback("dispatch_model(model, device_map='auto')", frames, error))
    assert k.kind == USAGE and "`device_map` as a str" in k.reason, k
    # the literal is of the type the library expects: what is a str there is not the caller's argument
    assert _kind(_traceback("dispatch_model(model, device_map={'': 0})", frames, error)).kind == BUG
    # the raising line reads another name than the keyword the caller wrote as a str
    other = frames[:1] + [("accelerate/utils/modeling.py", "check_device_map", "for name in self.plan.keys():")]
    assert _kind(_traceback("dispatch_model(model, device_map='auto')", other, error)).kind == BUG
