"""huggingface/accelerate: what its target module declares, through the pieces that read it, its
probe section (the default config file ``accelerate env`` prints) run by a real interpreter."""
from __future__ import annotations

from pathlib import Path

import pytest

from bot.env.probe import probe_sections
from bot.env.system_info import system_info
from bot.targets import get_target
from tests.target_support import (assert_fields_follow_the_form, assert_frames_are_library_frames, form_copy,
                                  probe_section, routed)

TARGET = get_target("accelerate")


def test_its_frames_are_library_frames() -> None:
    assert_frames_are_library_frames(TARGET)


def test_its_form_is_the_upstream_one() -> None:
    form = form_copy("accelerate")
    if form is not None:
        assert_fields_follow_the_form(TARGET, form)


def test_a_failure_in_its_code_routes_to_it() -> None:
    r = routed(["accelerate/big_modeling.py:dispatch_model", "accelerate/hooks.py:attach_align_device_hook"],
               "ValueError: You can't pass a device_map that offloads to disk without an offload_folder",
               call="model = dispatch_model(model, device_map=device_map)")
    assert r.target == "huggingface/accelerate" and r.raised_in == "accelerate"
    assert r.areas[0] == "big-model inference"


def test_its_probe_section_reads_the_default_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "hf" / "accelerate" / "default_config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("compute_environment: LOCAL_MACHINE\nmixed_precision: 'no'\nnum_processes: 2\n")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    # accelerate's own reader is shadowed (as where accelerate is broken): the section reads the
    # YAML itself, and importing accelerate (and torch) stays out of this test's time.
    shadow = tmp_path / "shadow" / "accelerate"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('accelerate is shadowed in this test')\n")
    assert "accelerate_config" in probe_sections() and "import:accelerate" in probe_sections()
    env = probe_section("accelerate_config", tmp_path / "shadow", monkeypatch)
    section = env["accelerate_config"]
    assert section["found"] is True and "shadowed" in section["load_error"]
    assert section["config"] == {"compute_environment": "LOCAL_MACHINE", "mixed_precision": "no", "num_processes": 2}
    # ...and its System Info shows it, as `accelerate env` does.
    assert "\t- num_processes: 2" in system_info(env, "accelerate")
