"""examples/gpu_two_cards on a machine with two GPUs (marked gpu; skipped with the reason elsewhere):
the split tiny Llama fails only when split, and reprobot finds that it needs two GPUs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "gpu_two_cards"


def _require_two_gpus() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    pytest.importorskip("accelerate")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs")


def _run(tmp_path, visible: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.gpu
def test_the_example_fails_only_when_split(tmp_path):
    _require_two_gpus()
    script = EXAMPLE / "split_llama_peft.py"
    one = _run(tmp_path, "0", str(script))
    assert one.returncode == 0, one.stderr[-2000:]
    two = _run(tmp_path, "0,1", str(script))
    assert two.returncode != 0 and "same device" in two.stderr, two.stdout + two.stderr[-2000:]


@pytest.mark.gpu
def test_reduce_gives_each_job_both_gpus_and_keeps_needing_them(tmp_path):
    _require_two_gpus()
    (tmp_path / "split_llama_peft.py").write_text((EXAMPLE / "split_llama_peft.py").read_text())
    proc = _run(tmp_path, "0,1", "-m", "bot", "reduce", "split_llama_peft.py", "--gpus", "0,1", "--out", "r",
                "--no-env", "--max-time", "500", timeout=580)
    assert proc.returncode in (0, 14), proc.stdout + proc.stderr
    (folder,) = (tmp_path / "r").iterdir()
    sig = json.loads((folder / "signature.json").read_text())
    red = json.loads((folder / "reduction.json").read_text())
    assert sig["gpus"]["per_job"] == 2 and sig["gpus"]["source"] == "measured", sig["gpus"]
    assert sig["needs_gpus"] == 2 and red["gpu_sets"] == [["0", "1"]]
    assert red["warm"]["enabled"], red["warm"]
    assert red["statements_after"] < red["statements_before"]
    repro = (folder / "repro.py").read_text()
    (tmp_path / "check.py").write_text(repro)
    assert _run(tmp_path, "0", "check.py").returncode == 0
