"""The bundled CPU example end to end: `reprobot reduce examples/cpu_gemma4_lora/train_lora.py`
turns the ~280-line LoRA training script into a repro of at most 12 statements that still fails
with PEFT's `Target module Gemma4ClippableLinear(...) is not supported` ValueError.

Needs the Hugging Face stack (torch, transformers with Gemma 4, peft) in this interpreter; the
model is a tiny Gemma 4 built from a config, nothing is downloaded.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.run_alone import run_alone
from reducer.analysis.size import count_statements
from reducer.failure.signature import MatchOptions, Signature, signature_of
from reducer.failure.tracebacks import all_records, parse_tracebacks

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cpu_gemma4_lora" / "train_lora.py"
MAX_STATEMENTS = 12

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "peft")),
    reason="needs the hf extra (torch, transformers, peft)")


def _failures(path: Path, cwd: Path) -> tuple[subprocess.CompletedProcess, list]:
    # the Hub offline: the example builds its tiny model from a config, and its repro, run alone in
    # an empty folder, must need nothing else either (#30)
    env = dict(os.environ, TMPDIR=str(cwd), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        proc = subprocess.run([sys.executable, str(path)], cwd=cwd, env=env, check=False, capture_output=True,
                              text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{path.name} did not terminate within 300s")
    records = all_records(parse_tracebacks(proc.stderr, "stderr") + parse_tracebacks(proc.stdout, "stdout"))
    return proc, records


def _is_clippable_error(record) -> bool:
    return (record.exc_type == "ValueError" and "Gemma4ClippableLinear" in record.message
            and "is not supported" in record.message)


def test_example_is_long_and_fails_with_the_clippable_linear_error(tmp_path):
    source = EXAMPLE.read_text(encoding="utf-8")
    assert 200 <= len(source.splitlines()) <= 320
    assert count_statements(source) > 5 * MAX_STATEMENTS
    proc, records = _failures(EXAMPLE, tmp_path)
    assert proc.returncode != 0
    hits = [r for r in records if _is_clippable_error(r)]
    assert hits, proc.stderr[-3000:]
    frames = signature_of(hits[0]).frames
    assert frames and frames[0].startswith("peft/"), frames


@pytest.mark.slow
def test_reduce_cpu_example_end_to_end(tmp_path):
    out = tmp_path / "repros"
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "reduce", str(EXAMPLE), "--out", str(out), "--jobs", "2",
         "--max-time", "600"],
        cwd=tmp_path, check=False, capture_output=True, text=True, timeout=1100)
    # 14: stopped at --max-time with the best result so far kept
    assert proc.returncode in (0, 14), proc.stderr[-3000:] + proc.stdout[-3000:]
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    folder = folders[0]
    assert folder.name.startswith("train-lora-")

    stored = json.loads((folder / "signature.json").read_text(encoding="utf-8"))
    target = Signature.from_dict(stored["signature"])
    assert target.exc_type == "ValueError"
    assert "Gemma4ClippableLinear" in (target.message or "")
    assert folder.name.endswith("-" + target.id)

    repro = (folder / "repro.py").read_text(encoding="utf-8")
    n = count_statements(repro)
    assert n < count_statements(EXAMPLE.read_text(encoding="utf-8")), repro
    assert "get_peft_model" in repro or "LoraConfig" in repro

    # The repro on its own, outside reprobot, alone in an empty folder and offline, fails the same way.
    rerun = tmp_path / "rerun"
    rerun.mkdir()
    (rerun / "repro.py").write_text(repro, encoding="utf-8")
    rproc, records = _failures(rerun / "repro.py", rerun)
    options = MatchOptions.from_dict(stored["options"])
    assert target in {signature_of(r, options) for r in records}, rproc.stderr[-3000:]
    # ... as the last traceback, raised uncaught
    last = parse_tracebacks(rproc.stderr, "stderr")[-1]
    assert signature_of(last, options) == target and rproc.returncode != 0, rproc.stderr[-3000:]

    reduction = json.loads((folder / "reduction.json").read_text(encoding="utf-8"))
    assert reduction["runs"] > 0
    # Print the figures the issue asks for; pytest -s shows them.
    print(f"\nCPU example: {reduction.get('runs')} runs, {reduction.get('wall_time')} s, "
          f"{n} statements\n{repro}")
    if n > MAX_STATEMENTS:
        # Issue 3's target for this example; within CI's 600 s budget the engine does not always
        # get there on two cores (bench/README.md and the notes have the measured figures).
        pytest.xfail(f"{n} statements > {MAX_STATEMENTS} after {reduction['runs']} runs "
                     f"in {reduction.get('wall_time')} s")


QUICK = ROOT / "examples" / "cpu_gemma4_lora" / "quick_lora.py"


@pytest.mark.slow
def test_readme_demo_reduces_the_quick_example_and_previews_the_issue(tmp_path):
    """README command 1 without its setup: `reduce quick_lora.py`, then `file --dry-run` with no
    folder named (the latest one), offline, with an empty index."""
    env = {**os.environ, "REPROBOT_INDEX_DB": str(tmp_path / "index.db"), "REPROBOT_OFFLINE": "1",
           "COLUMNS": "200"}
    env.pop("GITHUB_TOKEN", None)
    reduce = subprocess.run([sys.executable, "-m", "bot", "reduce", str(QUICK), "--max-time", "600"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert reduce.returncode in (0, 14), reduce.stderr[-3000:] + reduce.stdout[-3000:]
    (folder,) = (tmp_path / "repros").iterdir()
    repro = (folder / "repro.py").read_text(encoding="utf-8")
    assert "get_peft_model" in repro
    if reduce.returncode == 0:
        assert count_statements(repro) <= 6, repro
        # the repro's cold run in a clean folder ends with the original's message. Its numbers may
        # differ since issue #38: the model is rebuilt from its config's non-default values and
        # the value passes shrink them, and a size the message shows only as a product of two
        # config entries (out_features = heads x head_dim) is not protected (the closing note says so)
        from reducer.failure.normalize import normalize_message
        original = json.loads((folder / "signature.json").read_text(encoding="utf-8"))["record"]["message"]
        last = parse_tracebacks((folder / "traceback.txt").read_text(encoding="utf-8"), "stderr")[-1]
        assert normalize_message(last.message) == normalize_message(original)
        assert "Gemma4ClippableLinear" in last.message
        _assert_runs_alone_offline(folder, repro, tmp_path)
    preview = subprocess.run([sys.executable, "-m", "bot", "file", "--dry-run"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
    out = " ".join(preview.stdout.split())
    assert preview.returncode == 0, preview.stdout[-3000:] + preview.stderr[-3000:]
    assert "route: file at huggingface/peft" in out
    assert "huggingface/peft: issue preview" in out and "get_peft_model" in out
    assert "valid against the huggingface/peft bug-report form" in out
    assert sorted(p.name for p in folder.glob("draft-*.md")) == ["draft-peft.md"]


def _assert_runs_alone_offline(folder: Path, repro: str, tmp_path: Path) -> None:
    """The demo's repro no longer names the example's `tiny-gemma4` folder: saved alone as
    repro.py in an empty folder, with the Hub offline, it fails with the same signature (#30)."""
    reduction = json.loads((folder / "reduction.json").read_text(encoding="utf-8"))
    assert reduction["verified"] == "alone, offline" and reduction["needs"] == [], reduction.get("standalone")
    assert "tiny-gemma4'" not in repro and "from_pretrained" not in repro, repro
    alone = run_alone(folder, timeout=300, workdir=tmp_path)
    assert alone.same, (alone.expected, alone.got, alone.stderr_tail)
