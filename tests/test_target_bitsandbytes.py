"""bitsandbytes-foundation/bitsandbytes: what its target module declares, through the pieces that
read it, its probe section (the native library and backend) run by a real interpreter."""
from __future__ import annotations

from pathlib import Path

import pytest

from bot.env.probe import probe_sections
from bot.env.system_info import system_info
from bot.targets import get_target
from tests.target_support import (assert_fields_follow_the_form, assert_frames_are_library_frames, fake_distribution,
                                  form_copy, probe_section, routed)

TARGET = get_target("bitsandbytes")


def test_its_frames_are_library_frames() -> None:
    assert_frames_are_library_frames(TARGET)


def test_its_form_is_the_upstream_one() -> None:
    form = form_copy("bitsandbytes")
    if form is not None:
        assert_fields_follow_the_form(TARGET, form)


def test_a_failure_in_its_code_routes_to_it() -> None:
    r = routed(["bitsandbytes/nn/modules.py:forward", "bitsandbytes/autograd/_functions.py:matmul_4bit"],
               "RuntimeError: quant_state is required for 4-bit matmul", call="y = layer(x)")
    assert r.target == "bitsandbytes-foundation/bitsandbytes" and r.raised_in == "bitsandbytes"
    assert r.areas[0] == "quantization"


def test_its_probe_section_records_the_native_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A bitsandbytes that loaded no native library, installed (metadata) where the probe looks.
    site = fake_distribution(tmp_path / "site", "bitsandbytes", "0.0.1", {
        "__init__.py": "__version__ = '0.0.1'\n",
        "cextension.py": "BNB_BACKEND = 'CPU'\nlib = None\n"})
    assert "bitsandbytes" in probe_sections() and "import:bitsandbytes" not in probe_sections()
    env = probe_section("bitsandbytes", site, monkeypatch)
    assert env["bitsandbytes"] == {"installed": True, "version": "0.0.1", "backend": "CPU", "library": None,
                                   "mapped_libraries": []}
    # The section imported it: that is its import status in env.json's packages.
    assert env["packages"]["bitsandbytes"]["import"] == "ok"
    info = system_info(env, "bitsandbytes")
    assert "bitsandbytes v0.0.1" in info and "Native library loaded: none" in info
