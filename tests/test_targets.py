"""The target registry: its views, the two targets added through it (huggingface/trl and
pytorch/pytorch: routing and drafts through the real templates), and a throwaway target
registered by a fixture that gets routing, a draft and System Info without any other module
knowing about it."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from bot.cli import build_parser, main
from bot.env.probe import capture_env
from bot.env.system_info import system_info
from bot.issue.draft import build_draft
from bot.issue.forms import CONFIRM_MARK, MISSING_MARK, field_values, get_form, parse_sections, validate
from bot import targets as registry
from bot.upstream.failure import failure_from_text
from bot.upstream.route import maintainers, route
from bot.targets import REPO_KEYS, TARGETS, Target, textarea
from bot.targets.base import MAINTAINERS_FILE
from reducer.errors import ExitCode, ReprobotError
from tests.test_route import make_repro, tb

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("testhost-xyz",)

# An env.json in the shape the probe writes, for a CUDA machine with trl installed.
TRL_ENV = {
    "python": {"version": "3.12.13", "full_version": "3.12.13", "bits": 64},
    "platform": {"platform": "Linux-6.1.123+-x86_64-with-glibc2.35", "system": "Linux", "libc": "glibc-2.35",
                 "machine": "x86_64", "distro": "Ubuntu 22.04.5 LTS"},
    "torch": {"installed": True, "version": "2.10.0+cu128", "cuda_built": "12.8", "hip_built": None,
              "cudnn": 91002, "cuda_available": True, "accelerator": "CUDA", "debug": False,
              "devices": [{"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85017821184, "capability": "9.0"}]},
    "gpu": {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85520809984}], "driver_version": "570.86.15"},
    "packages": {name: {"installed": True, "version": version, "kind": "index", "import": "ok"} for name, version in {
        "trl": "0.24.0", "transformers": "5.6.2", "accelerate": "1.13.0", "peft": "0.19.1", "datasets": "4.4.1",
        "huggingface_hub": "1.12.0", "numpy": "2.0.2", "torch": "2.10.0+cu128"}.items()},
    "distributions": {"torch": "2.10.0+cu128", "numpy": "2.0.2", "triton": "3.5.0", "trl": "0.24.0",
                      "nvidia-cudnn-cu12": "9.10.2.21", "requests": "2.32.3"},
    "accelerate_config": {"found": False},
}


def _route(frames: list[str], error: str, call: str = "main()", repro: str | None = None):
    failure = failure_from_text(tb(frames, error, call))
    failure.repro_source = repro
    return route(failure)


# --- the registry and its views ----------------------------------------------------------------

def test_every_reader_sees_the_same_targets() -> None:
    keys = [t.key for t in registry.targets()]
    assert keys[:4] == ["transformers", "peft", "accelerate", "bitsandbytes"]   # the order commands list
    assert {"trl", "pytorch"} <= set(keys)
    assert list(REPO_KEYS) == keys == list(TARGETS)
    assert set(maintainers()["repos"]) == {t.repo for t in registry.targets() if t.maintainers == MAINTAINERS_FILE}
    for t in registry.targets():
        assert (ROOT / "templates" / t.template_name).is_file(), t.key
        assert get_form(t.repo).key == t.key
    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and "draft" in a.choices).choices
    for command, option in (("draft", "--repo"), ("file", "--repo"), ("env", "--system-info")):
        action = next(a for a in sub[command]._actions if option in a.option_strings)
        assert list(action.choices) == keys, command


def test_torch_is_cross_linked_not_claimed_when_hf_code_made_the_call() -> None:
    r = _route(["peft/peft_model.py:forward", "peft/tuners/lora/layer.py:forward", "torch/nn/modules/linear.py:forward"],
               "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x8)")
    assert r.target == "huggingface/peft"
    assert "pytorch/pytorch" in r.cross_links


def test_registering_twice_or_a_taken_package_is_refused() -> None:
    peft = registry.get_target("peft")
    with pytest.raises(ValueError):
        registry.register(peft)
    with pytest.raises(ValueError):
        registry.register(Target(key="peft2", repo="x/peft2", packages=("peft",), fields=peft.fields,
                                 render_system_info=peft.render_system_info))
    with pytest.raises(ReprobotError) as e:
        registry.get_target("diffusers")
    assert e.value.exit_code == ExitCode.USAGE


# --- huggingface/trl -----------------------------------------------------------------------------

def test_a_failure_raised_in_trl_goes_to_trl() -> None:
    r = _route(["trl/trainer/sft_trainer.py:__init__", "trl/trainer/sft_trainer.py:_prepare_dataset"],
               "ValueError: The dataset has no 'text' field and no formatting function was given",
               call="trainer = SFTTrainer(model=model, train_dataset=ds)")
    assert r.target == "huggingface/trl"
    assert r.raised_in == "trl"
    assert r.who_can_help == []          # trl's form has no who-can-help field; maintainers.json names nobody


def test_trl_handing_torch_the_input_owns_it_even_across_three_packages() -> None:
    # transformers' training loop calls trl's loss, which makes the failing torch call; peft is in
    # the repro. Without trl in the registry this was transformers' "integration" failure.
    r = _route(["transformers/trainer.py:train", "transformers/trainer.py:training_step",
                "trl/trainer/dpo_trainer.py:compute_loss", "torch/nn/functional.py:logsigmoid"],
               "RuntimeError: The size of tensor a (4) must match the size of tensor b (8) at non-singleton dimension 0",
               call="trainer.train()", repro="from peft import LoraConfig\nfrom trl import DPOTrainer\n")
    assert r.target == "huggingface/trl"
    assert any("trl made the failing torch call" in x for x in r.ranked[0]["reasons"])
    assert "huggingface/transformers" in r.cross_links and "pytorch/pytorch" in r.cross_links


def test_a_pasted_traceback_cut_at_a_trl_call_goes_to_trl() -> None:
    text = ("Traceback (most recent call last):\n  File \"/home/u/train.py\", line 12, in <module>\n"
            "    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args)\n"
            "ValueError: num_generations (3) must divide the global batch size (8)\n")
    r = route(failure_from_text(text))
    assert r.target == "huggingface/trl"
    assert "GRPOTrainer" in r.verdict


def test_an_error_line_naming_a_trl_class_goes_to_trl() -> None:
    r = route(failure_from_text("TypeError: SFTConfig.__init__() got an unexpected keyword argument 'max_seq_length'"))
    assert r.target == "huggingface/trl"


# --- pytorch/pytorch -----------------------------------------------------------------------------

def test_torchs_own_failure_with_no_hf_package_goes_to_pytorch() -> None:
    r = _route(["torch/_dynamo/eval_frame.py:_fn", "torch/_inductor/compile_fx.py:compile_fx"],
               "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: AssertionError: ",
               call="out = torch.compile(f)(x)")
    assert r.target == "pytorch/pytorch"
    assert r.verdict.startswith("file at pytorch/pytorch")
    assert r.cross_links == [] and r.who_can_help == []


def test_user_code_handing_torch_bad_input_stays_the_users() -> None:
    r = _route(["torch/nn/modules/module.py:_call_impl", "torch/nn/modules/linear.py:forward"],
               "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x8)", call="y = layer(x)")
    assert r.target is None and r.verdict.startswith("not one of ours")


# --- drafts through the real templates -----------------------------------------------------------

TRL_TB = tb(["trl/trainer/sft_trainer.py:__init__", "trl/trainer/sft_trainer.py:_prepare_dataset"],
            "ValueError: The dataset has no 'text' field and no formatting function was given",
            call="trainer = SFTTrainer(model=model, train_dataset=ds)")
TORCH_TB = tb(["torch/_dynamo/eval_frame.py:_fn", "torch/_inductor/compile_fx.py:compile_fx"],
              "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: AssertionError: ",
              call="out = torch.compile(f)(x)")


def _routed_folder(root: Path, text: str, env: dict | None) -> Path:
    folder = make_repro(root, text, "import torch\nprint(1)\n", env)
    assert main(["route", str(folder), "--no-index"]) == 0
    return folder


def test_trl_draft_fills_trls_form(tmp_path: Path) -> None:
    folder = _routed_folder(tmp_path, TRL_TB, TRL_ENV)
    assert json.loads((folder / "route.json").read_text())["target"] == "huggingface/trl"
    draft = build_draft(folder, "trl", names=NAMES)
    form = get_form("trl")
    _, sections = parse_sections(draft.body)
    assert [s.label for s in sections] == ["Reproduction", "System Info", "Checklist"] == form.labels
    check = validate(form, draft.body)
    assert check.ok, check.problems
    # The expected-behaviour proposal and the checklist's unticked items wait for a person.
    assert set(check.unconfirmed) == {"reproduction", "terms"}
    ticked = field_values(form, draft.body)["terms"]
    assert "I have included my system information" in ticked and "Any traceback provided is complete" in ticked
    assert not any(t.startswith("I have checked that my issue isn't already filed") for t in ticked)
    info = field_values(form, draft.body)["system-info"]
    assert "- TRL version: 0.24.0" in info and "- accelerator(s): NVIDIA H100 80GB HBM3" in info
    assert "SFTTrainer" in draft.title
    url = urlsplit(draft.prefill_url().url)
    assert url.path == "/huggingface/trl/issues/new"
    assert {"reproduction", "system-info"} <= set(parse_qs(url.query))
    assert any("checklist" in n for n in draft.notes)


def test_pytorch_draft_fills_pytorchs_form(tmp_path: Path) -> None:
    folder = _routed_folder(tmp_path, TORCH_TB, TRL_ENV)
    draft = build_draft(folder, "pytorch", names=NAMES)
    form = get_form("pytorch")
    _, sections = parse_sections(draft.body)
    assert [s.label for s in sections] == ["\U0001F41B Describe the bug", "Versions"]
    assert validate(form, draft.body).ok
    versions = field_values(form, draft.body)["versions"]
    assert versions.startswith("```text\nPyTorch version: 2.10.0+cu128\n")
    assert "GPU models and configuration: \nGPU 0: NVIDIA H100 80GB HBM3" in versions
    assert "[pip3] torch==2.10.0+cu128" in versions and "requests" not in versions
    bug = field_values(form, draft.body)["describe-the-bug"]
    assert CONFIRM_MARK in bug and "BackendCompilerFailed" in bug and "```python" in bug
    # pytorch's fields declare no ids: the URL can only carry the title.
    url = draft.prefill_url()
    assert not url.complete and set(parse_qs(urlsplit(url.url).query)) == {"template", "title"}
    assert "paste" in url.instruction
    assert any("AI-assisted" in n for n in draft.notes)


def test_pytorch_draft_without_env_asks_for_collect_env(tmp_path: Path) -> None:
    folder = _routed_folder(tmp_path, TORCH_TB, None)
    draft = build_draft(folder, "pytorch", names=NAMES)
    assert MISSING_MARK in draft.body and "python -m torch.utils.collect_env" in draft.body
    assert [p.field for p in validate(get_form("pytorch"), draft.body).problems] == ["versions"]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_pytorch_block_matches_collect_env() -> None:
    """The fields reprobot renders say what torch's own collect_env says on this machine."""
    proc = subprocess.run([sys.executable, "-m", "torch.utils.collect_env"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-500:]
    real = dict(re.findall(r"^([A-Za-z][^:\n]*): (.*)$", proc.stdout, re.MULTILINE))
    ours = dict(re.findall(r"^([A-Za-z][^:\n]*): (.*)$", system_info(capture_env(sys.executable), "pytorch"),
                           re.MULTILINE))
    shared = ["PyTorch version", "Is debug build", "ROCM used to build PyTorch", "Libc version", "Python platform",
              "Is CUDA available", "HIP runtime version"]
    for key in shared:
        assert ours[key] == real[key], f"{key}: ours {ours[key]!r} vs collect_env {real[key]!r}"
    # A CPU build: collect_env says "None" or, when it finds a CUDA toolkit on the machine (which
    # env.json does not record), "Could not collect"; reprobot says what the build says.
    cuda = real["CUDA used to build PyTorch"]
    assert ours["CUDA used to build PyTorch"] == (cuda if cuda not in ("None", "Could not collect") else "None")


# --- a throwaway target, registered by a fixture ------------------------------------------------

def _render_fakelib(env: dict) -> str:
    pkg = (env.get("packages") or {}).get("fakelib") or {}
    return f"fakelib {pkg.get('version', 'not installed')} on {(env.get('python') or {}).get('version', '?')}"


@pytest.fixture
def fakelib(tmp_path: Path) -> Iterator[Target]:
    templates = tmp_path / "fakelib-templates"
    templates.mkdir()
    # Its own template, next to nothing of reprobot's; the shared partials come from templates/.
    (templates / "fakelib.md.j2").write_text(
        '{% include "partials/notes.md.j2" %}\n### What happened\n\n{% include "partials/reproduction.md.j2" %}\n\n'
        '### Environment\n\n{% include "partials/env.md.j2" %}\n', encoding="utf-8")
    target = registry.register(Target(
        key="fakelib", repo="example-org/fakelib", packages=("fakelib",),
        fields=(textarea("what-happened", "What happened", required=True),
                textarea("environment", "Environment", required=True)),
        render_system_info=_render_fakelib, system_info_command="python -m fakelib.env",
        template_dir=templates, api_names=r"\bFake(?:Widget|Loader)\b|\bfakelib\.\w",
        callee_names=("FakeWidget",), area_prefixes=(("fakelib/io", "io"),), checkout_parent="src",
        env_packages=("fakelib",)))
    try:
        yield target
    finally:
        registry.unregister("fakelib")


def test_a_registered_target_gets_routing_a_draft_and_system_info(fakelib: Target, tmp_path: Path) -> None:
    text = tb(["fakelib/widgets.py:build", "fakelib/io/read.py:load"],
              "KeyError: 'width'", call="w = FakeWidget.build(cfg)")
    r = route(failure_from_text(text))
    assert r.target == "example-org/fakelib" and r.raised_in == "fakelib"
    assert r.areas == ["io"]
    # An editable checkout of it is still its code.
    checkout = text.replace("/home/u/venv/lib/python3.11/site-packages/", "/home/u/src/fakelib/src/")
    assert route(failure_from_text(checkout)).target == "example-org/fakelib"
    # A pasted line that only calls its API.
    cut = ("Traceback (most recent call last):\n  File \"/home/u/run.py\", line 3, in <module>\n"
           "    w = FakeWidget.build(cfg)\nKeyError: 'width'\n")
    assert route(failure_from_text(cut)).target == "example-org/fakelib"

    env = {"python": {"version": "3.12.1"}, "packages": {"fakelib": {"installed": True, "version": "1.2.3"}}}
    assert system_info(env, "fakelib") == "fakelib 1.2.3 on 3.12.1"
    assert "fakelib" in registry.env_packages()

    folder = make_repro(tmp_path / "repros", text, "import fakelib\n", env)
    assert main(["route", str(folder), "--no-index"]) == 0
    assert main(["draft", str(folder)]) == 0                  # the routed repo, through the CLI
    body = (folder / "draft-fakelib.md").read_text(encoding="utf-8")
    _, sections = parse_sections(body)
    assert [s.label for s in sections] == ["What happened", "Environment"]
    assert validate(get_form("fakelib"), body).ok
    assert "fakelib 1.2.3 on 3.12.1" in body and "KeyError: 'width'" in body
    meta = json.loads((folder / "draft-fakelib.json").read_text())
    assert meta["url"].startswith("https://github.com/example-org/fakelib/issues/new?template=bug-report.yml")
    assert "fakelib" in REPO_KEYS and TARGETS["fakelib"] == "example-org/fakelib"


def test_the_throwaway_target_is_gone_after_its_fixture() -> None:
    assert "fakelib" not in REPO_KEYS
    text = tb(["fakelib/widgets.py:build"], "KeyError: 'width'")
    assert route(failure_from_text(text)).target is None
    with pytest.raises(ReprobotError) as e:   # --repo's type: reprobot's one-line usage error
        build_parser().parse_args(["draft", "x", "--repo", "fakelib"])
    assert e.value.exit_code == ExitCode.USAGE


# --- a seventh target, written by following CONTRIBUTING.md ("Add a target") ---------------------

NEW_TARGET = ROOT / "tests" / "data" / "new_target"
DATASETS_ENV = {"python": {"version": "3.12.1"}, "platform": {"platform": "Linux-6.1-x86_64-with-glibc2.35"},
                "packages": {n: {"installed": True, "version": v, "kind": "index"} for n, v in
                             {"datasets": "4.4.1", "huggingface_hub": "1.12.0", "pyarrow": "21.0.0",
                              "pandas": "2.3.3", "fsspec": "2025.9.0"}.items()}}
DATASETS_TB = tb(["datasets/arrow_dataset.py:map", "datasets/arrow_dataset.py:_map_single"],
                 "KeyError: 'text'", call="ds = ds.map(tokenize, batched=True)")


@pytest.fixture
def datasets_target() -> Iterator[Target]:
    """The module and template as CONTRIBUTING has them written (bot/targets/datasets.py,
    templates/datasets.md.j2), loaded from tests/data/new_target/ and registered: what the
    registry does with a module it finds in bot/targets/."""
    spec = importlib.util.spec_from_file_location("reprobot_new_target_datasets", NEW_TARGET / "datasets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target = registry.register(dataclasses.replace(module.TARGET, template_dir=NEW_TARGET))
    try:
        yield target
    finally:
        registry.unregister(target.key)


def test_a_module_following_contributing_is_a_target(datasets_target: Target, tmp_path: Path) -> None:
    assert datasets_target.key == "datasets" and "datasets" in REPO_KEYS
    # Routed: a failure raised in its code, and its area; its form names no one to tag.
    r = route(failure_from_text(DATASETS_TB))
    assert r.target == "huggingface/datasets" and r.raised_in == "datasets"
    assert r.areas == ["dataset processing"] and r.who_can_help == []
    # Rendered: the block `datasets-cli env` prints.
    info = system_info(DATASETS_ENV, "datasets")
    assert info.splitlines()[:3] == ["- `datasets` version: 4.4.1", "- Platform: Linux-6.1-x86_64-with-glibc2.35",
                                     "- Python version: 3.12.1"]
    assert "- PyArrow version: 21.0.0" in info and "- `fsspec` version: 2025.9.0" in info
    # Every derived list has it: the probe records it and what its block names, versions swaps it.
    assert {"datasets", "pyarrow", "fsspec"} <= set(registry.env_packages())
    assert "datasets" in registry.versions_packages()
    # Drafted through the CLI, its form's sections in its order, valid.
    folder = make_repro(tmp_path, DATASETS_TB, "import datasets\n", DATASETS_ENV)
    assert main(["route", str(folder), "--no-index"]) == 0
    assert json.loads((folder / "route.json").read_text())["target"] == "huggingface/datasets"
    assert main(["draft", str(folder)]) == 0
    body = (folder / "draft-datasets.md").read_text(encoding="utf-8")
    form = get_form("datasets")
    _, sections = parse_sections(body)
    assert [s.label for s in sections] == form.labels == ["Describe the bug", "Steps to reproduce the bug",
                                                          "Expected behavior", "Environment info"]
    assert validate(form, body).ok
    assert "- `datasets` version: 4.4.1" in field_values(form, body)["environment-info"]
    meta = json.loads((folder / "draft-datasets.json").read_text())
    assert meta["url"].startswith("https://github.com/huggingface/datasets/issues/new?template=bug-report.yml")
