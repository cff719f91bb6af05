"""A seventh target, huggingface/datasets, added by following CONTRIBUTING.md's "Add a target" step
by step in a scratch folder: its module (tests/data/new_target/datasets.py, as bot/targets/datasets.py
would be), the copy of its upstream form, its template, registered as the registry registers a
module it finds. Then the per-target test the recipe asks for, with the same helpers as the six
others' (tests/target_support.py): its frames are library frames to the engine, its form is the
upstream one, a failure in its code (installed or an editable checkout) routes to it, and the probe
records it with no section of its own."""
from __future__ import annotations

import dataclasses
import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import targets as registry
from bot.env.probe import probe_args, probe_sections
from bot.targets import Target
from bot.upstream.failure import failure_from_text
from bot.upstream.route import route
from reducer import stack
from tests.target_support import assert_fields_follow_the_form, assert_frames_are_library_frames, routed
from tests.test_route import tb

NEW_TARGET = Path(__file__).resolve().parent / "data" / "new_target"

# Step 1's form copy: huggingface/datasets' .github/ISSUE_TEMPLATE/bug-report.yml, its fields
# (descriptions and placeholders left out: the target declares ids, labels and what is required).
FORM = """\
name: Bug report
description: Create a report to help reproduce and fix the bug
body:
  - type: textarea
    id: description
    attributes:
      label: Describe the bug
    validations:
      required: true
  - type: textarea
    id: reproduction
    attributes:
      label: Steps to reproduce the bug
    validations:
      required: true
  - type: textarea
    id: expected-behavior
    validations:
      required: true
    attributes:
      label: Expected behavior
  - type: textarea
    id: environment-info
    attributes:
      label: Environment info
    validations:
      required: true
"""


@pytest.fixture
def datasets_target(tmp_path: Path) -> Iterator[tuple[Target, Path]]:
    # The files the recipe adds, laid out as in the repo: the module, the form's copy, the template.
    (tmp_path / "bot" / "targets").mkdir(parents=True)
    module_file = tmp_path / "bot" / "targets" / "datasets.py"
    shutil.copy(NEW_TARGET / "datasets.py", module_file)
    form = tmp_path / "tests" / "data" / "upstream-forms" / "datasets" / "bug-report.yml"
    form.parent.mkdir(parents=True)
    form.write_text(FORM, encoding="utf-8")
    (tmp_path / "templates").mkdir()
    shutil.copy(NEW_TARGET / "datasets.md.j2", tmp_path / "templates" / "datasets.md.j2")
    # What the registry does with a module of bot/targets/ that defines TARGET.
    spec = importlib.util.spec_from_file_location("reprobot_scratch_target_datasets", module_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target = registry.register(dataclasses.replace(module.TARGET, template_dir=tmp_path / "templates"))
    try:
        yield target, form
    finally:
        registry.unregister(target.key)


def test_its_frames_are_library_frames(datasets_target: tuple[Target, Path]) -> None:
    target, _ = datasets_target
    assert "datasets" in stack.checkout_packages()           # the engine was told by the registry
    assert_frames_are_library_frames(target)


def test_its_form_is_the_upstream_one(datasets_target: tuple[Target, Path]) -> None:
    target, form = datasets_target
    assert_fields_follow_the_form(target, form)


def test_a_failure_in_its_code_routes_to_it(datasets_target: tuple[Target, Path]) -> None:
    frames = ["datasets/arrow_dataset.py:map", "datasets/arrow_dataset.py:_map_single"]
    r = routed(frames, "KeyError: 'text'", call="ds = ds.map(tokenize, batched=True)")
    assert r.target == "huggingface/datasets" and r.raised_in == "datasets" and r.areas == ["dataset processing"]
    # Run from an editable checkout of datasets: still its code, still routed to it.
    checkout = tb(frames, "KeyError: 'text'", call="ds = ds.map(tokenize, batched=True)").replace(
        "/home/u/venv/lib/python3.11/site-packages/", "/home/u/code/datasets/src/")
    r = route(failure_from_text(checkout))
    assert r.target == "huggingface/datasets" and r.raised_in == "datasets"


def test_the_probe_records_it_without_a_section_of_its_own(datasets_target: tuple[Target, Path]) -> None:
    target, _ = datasets_target
    assert target.probe_section is None and "import:datasets" not in probe_sections()
    assert "datasets" in probe_args()["--stack"].split(",")
    assert {"pyarrow", "fsspec"} <= set(probe_args()["--packages"].split(","))
