"""huggingface/trl: what its target module declares, through the pieces that read it."""
from __future__ import annotations

from bot.env.probe import probe_args, probe_sections
from bot.targets import get_target
from tests.target_support import assert_frames_are_library_frames, routed

TARGET = get_target("trl")


def test_its_frames_are_library_frames() -> None:
    assert_frames_are_library_frames(TARGET)


def test_it_wires_integrations_itself() -> None:
    # transformers' loop calls trl's loss, which makes the failing torch call, peft in the path too:
    # trl wires them together itself, so this is not transformers' "integration" failure.
    r = routed(["transformers/trainer.py:training_step", "peft/peft_model.py:forward",
                "trl/trainer/dpo_trainer.py:compute_loss", "torch/nn/functional.py:logsigmoid"],
               "RuntimeError: The size of tensor a (4) must match the size of tensor b (8) at non-singleton dimension 0",
               call="trainer.train()")
    assert TARGET.wires_integrations and r.target == "huggingface/trl"
    assert not any("integration is wired" in x for c in r.ranked for x in c["reasons"])


def test_the_probe_records_it_without_a_section_of_its_own() -> None:
    assert TARGET.probe_section is None and not any(s.endswith(":trl") for s in probe_sections())
    assert "trl" in probe_args()["--stack"].split(",")
