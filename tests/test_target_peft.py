"""huggingface/peft: what its target module declares, through the pieces that read it."""
from __future__ import annotations

from bot.env.probe import probe_sections
from bot.targets import get_target
from bot.upstream.failure import failure_from_text
from bot.upstream.route import route
from reducer import stack
from reducer.stack import Spelling
from tests.target_support import assert_fields_follow_the_form, assert_frames_are_library_frames, form_copy, routed

TARGET = get_target("peft")


def test_its_frames_are_library_frames() -> None:
    assert_frames_are_library_frames(TARGET)


def test_its_form_is_the_upstream_one() -> None:
    form = form_copy("peft")
    if form is not None:
        assert_fields_follow_the_form(TARGET, form)


def test_a_failure_in_its_code_routes_to_it() -> None:
    r = routed(["peft/mapping_func.py:get_peft_model", "peft/tuners/tuners_utils.py:inject_adapter"],
               "ValueError: Target modules {'q_proj'} not found in the base model.",
               call="model = get_peft_model(base, config)")
    assert r.target == "huggingface/peft" and r.raised_in == "peft" and r.areas == ["peft integration"]
    # A paste cut at the user's line: its API names say whose call it was.
    cut = ("Traceback (most recent call last):\n  File \"/home/u/train.py\", line 9, in <module>\n"
           "    model = get_peft_model(base, config)\nValueError: Target modules {'q_proj'} not found\n")
    assert route(failure_from_text(cut)).target == "huggingface/peft"


def test_its_probe_section_is_an_import() -> None:
    assert TARGET.probe_section is None and "import:peft" in probe_sections()


def test_an_adapter_folder_is_rebuilt_with_get_peft_model() -> None:
    assert stack.adapter_wrapper("LoraConfig") == Spelling("get_peft_model", (("peft", "get_peft_model"),
                                                                              ("peft", "LoraConfig")))
