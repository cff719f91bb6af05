"""pytorch/pytorch: what its target module declares, through the pieces that read it."""
from __future__ import annotations

from bot.env.probe import probe_sections
from bot.targets import get_target
from tests.target_support import assert_frames_are_library_frames, routed

TARGET = get_target("pytorch")


def test_its_frames_are_library_frames() -> None:
    assert_frames_are_library_frames(TARGET)


def test_it_is_the_foundation_the_target_only_of_its_own_failures() -> None:
    own = routed(["torch/_dynamo/eval_frame.py:_fn", "torch/_inductor/compile_fx.py:compile_fx"],
                 "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: AssertionError: ",
                 call="out = torch.compile(f)(x)")
    assert TARGET.foundation and own.target == "pytorch/pytorch"
    under_peft = routed(["peft/peft_model.py:forward", "torch/nn/modules/linear.py:forward"],
                        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x8)")
    assert under_peft.target == "huggingface/peft" and "pytorch/pytorch" in under_peft.cross_links


def test_the_probes_torch_section_is_the_foundations() -> None:
    # torch's section (the build, CUDA, devices) is the probe's own: every System Info reads it.
    assert TARGET.probe_section is None and "torch" in probe_sections()
