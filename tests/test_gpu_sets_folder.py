"""GPU sets per job (#29), the bot's side: what the repro folder stores of a failure that needs
two GPUs and what the draft says of it. The engine's side (the sets, the walk back) is
tests/test_gpu_sets.py, which imports only `reducer`."""
from __future__ import annotations

import json

from bot.issue.draft import _evidence
from bot.store import ReproDir, record_failure
from reducer.failure.original import find_failure
from reducer.failure.signature import Signature
from tests.test_gpu_sets import SAME_DEVICE, TWO_ONLY, no_nvidia_smi, spec_for, write  # noqa: F401 - a fixture


def test_needs_two_gpus_is_stored(tmp_path):
    script = write(tmp_path / "two.py", TWO_ONLY)
    failure = find_failure(spec_for(script, gpus=["0", "1"], gpus_per_job=2))
    repro = record_failure(failure, root=tmp_path / "r")
    data = json.loads(repro.signature_json.read_text())
    assert data["needs_gpus"] == 2 and data["gpus"]["set"] == ["0", "1"]


def test_the_draft_says_it_needs_two_gpus(tmp_path):
    sig = Signature("RuntimeError", SAME_DEVICE, ())
    folder = ReproDir(tmp_path)
    needs = _evidence(folder, {"runs": [{}, {}], "needs_gpus": 2, "gpus": {"one_gpu": "passes"}}, None, True, sig, [])
    plain = _evidence(folder, {"runs": [{}, {}]}, None, True, sig, [])
    assert any("needs 2 GPUs" in s and "on one GPU the original passes" in s for s in needs)
    assert not any("GPUs" in s for s in plain)
