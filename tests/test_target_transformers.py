"""huggingface/transformers: what its target module declares, through the pieces that read it."""
from __future__ import annotations

from bot.env.probe import probe_sections
from bot.targets import get_target
from bot.upstream.route import model_families
from reducer import stack
from reducer.stack import Spelling
from tests.target_support import assert_fields_follow_the_form, assert_frames_are_library_frames, form_copy, routed

TARGET = get_target("transformers")


def test_its_frames_are_library_frames() -> None:
    assert_frames_are_library_frames(TARGET)


def test_its_form_is_the_upstream_one() -> None:
    form = form_copy("transformers")
    if form is not None:            # the shared copy (../shared/upstream-forms/) may not be beside the repo
        assert_fields_follow_the_form(TARGET, form)


def test_its_model_families_route_to_it() -> None:
    # The failing line is in its model code: the family is read from the path, and it owns it.
    r = routed(["transformers/models/gemma4/modeling_gemma4.py:forward"], "KeyError: 'rope_type'", call="model(x)")
    assert r.target == "huggingface/transformers" and r.model_family == "gemma4"
    assert "the failing line is gemma4 model code (transformers/models/gemma4/)" in r.ranked[0]["reasons"]
    assert r.areas == ["model family: gemma4"]
    # Its class names spell a family in a message; its generic classes do not.
    assert model_families([], "Qwen2VLForConditionalGeneration is not AutoModelForCausalLM nor PeftModel", None) \
        == ["qwen2_vl"]


def test_an_integration_across_three_packages_on_its_model_is_filed_here() -> None:
    r = routed(["peft/peft_model.py:forward", "transformers/models/llama/modeling_llama.py:forward",
                "accelerate/hooks.py:pre_forward", "accelerate/utils/operations.py:send_to_device",
                "torch/nn/functional.py:embedding"],
               "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
               call="out = model(**batch)")
    assert r.target == "huggingface/transformers"
    assert any("on a transformers model: file where the integration is wired" in x for x in r.ranked[0]["reasons"])


def test_its_probe_section_is_an_import() -> None:
    assert TARGET.probe_section is None and "import:transformers" in probe_sections()


def test_a_config_folder_is_rebuilt_from_its_model_type() -> None:
    # What reducer/reduction/standalone.py asks the engine's interface, answered by this target.
    assert stack.config_by_type("AutoModelForCausalLM") == Spelling("AutoConfig.for_model",
                                                                    (("transformers", "AutoConfig"),))
    assert stack.config_by_type("transformers.AutoConfig") == Spelling("transformers.AutoConfig.for_model")
