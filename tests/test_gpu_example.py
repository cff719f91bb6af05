"""The GPU example (examples/gpu_gemma4_bnb): what runs on CPU here, and the GPU checks that skip.

CPU: the tiny Gemma4 builds and reloads, its adapter loads and changes the logits, the worker's
CPU fallback serves requests, logs failures with tracebacks that reprobot's parser finds and
exits 0, and the scenario matrix's harness reports PASS/FAIL/CRASH/TIMEOUT lines.
GPU (marked `gpu`): the bnb 4-bit scenarios; they skip with the reason where no CUDA is visible.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from reducer.failure.tracebacks import parse_tracebacks

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gpu_gemma4_bnb"
WORKER = EXAMPLE / "inference_worker.py"
MATRIX = EXAMPLE / "repro_matrix.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


build_tiny = _load("gpu_example_build_tiny", EXAMPLE / "build_tiny.py")


def _run_worker(env_extra: dict[str, str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", **env_extra}
    return subprocess.run(
        [sys.executable, str(WORKER)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny.build(tmp_path_factory.mktemp("tiny") / "tiny")


WORKER_REQUESTS = [
    {"id": "good", "model": "gemma4-tiny-it", "client": "client-alpha", "prompt": "What changed in the Q3 report?"},
    {"id": "bad", "model": "gemma4-tiny-it", "client": "client-gamma", "prompt": "hello"},
    {"id": "after", "model": "gemma4-tiny-it", "client": "client-beta", "prompt": "support hours?", "params": "creative"},
]


@pytest.fixture(scope="module")
def worker_run(tmp_path_factory):
    """One CPU-fallback run of the worker (a subprocess, as reprobot runs it): it builds its own
    checkpoint, serves a good request, fails one for an unknown client, then serves another."""
    root = tmp_path_factory.mktemp("worker")
    home = root / "tiny_gemma4"
    req_file = root / "requests.json"
    req_file.write_text(json.dumps(WORKER_REQUESTS))
    proc = _run_worker({"REPRO_DEVICE": "cpu", "GEMMA4_TINY_DIR": str(home), "REPRO_REQUESTS": str(req_file)}, cwd=root)
    return home, proc


# ------------------------------------------------------------------------------ build_tiny


def test_build_tiny_writes_a_loadable_three_tower_model(tiny):
    from transformers import Gemma4ForConditionalGeneration

    assert (tiny.base / "config.json").is_file() and (tiny.base / "model.safetensors").is_file()
    config = json.loads((tiny.base / "config.json").read_text())
    assert config["vision_config"] is not None and config["audio_config"] is not None
    assert config["text_config"]["num_kv_shared_layers"] == 2  # the shared-KV path stays in play

    model = Gemma4ForConditionalGeneration.from_pretrained(tiny.base)
    names = {name for name, _ in model.named_modules()}
    for required in ("model.vision_tower", "model.audio_tower", "model.language_model"):
        assert required in names
    # every nn.Linear the 4-bit path quantizes has widths bnb's kernels take
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and "language_model" in name:
            assert module.in_features % 16 == 0 and module.out_features % 16 == 0, name


def test_build_tiny_is_idempotent_and_the_cli_prints_paths(tiny, tmp_path):
    stamp = (tiny.base / "model.safetensors").stat().st_mtime_ns
    again = build_tiny.build(tiny.root)
    assert again == tiny
    assert (tiny.base / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt

    assert build_tiny.main([str(tiny.root)]) == 0


def test_adapter_targets_only_the_text_tower_and_changes_the_logits(tiny):
    from peft import PeftModel
    from transformers import Gemma4ForConditionalGeneration

    adapter_cfg = json.loads((tiny.adapter / "adapter_config.json").read_text())
    assert adapter_cfg["target_modules"] == build_tiny.LORA_TARGET_REGEX

    base = Gemma4ForConditionalGeneration.from_pretrained(tiny.base, dtype=torch.float32)
    ids = torch.tensor([[2, 17, 33, 5, 9, 11]])
    with torch.no_grad():
        before = base(input_ids=ids).logits
    model = PeftModel.from_pretrained(base, tiny.adapter, is_trainable=False)
    lora_layers = [name for name, _ in model.named_modules() if name.endswith("lora_A")]
    assert lora_layers and all("language_model" in name for name in lora_layers)
    with torch.no_grad():
        after = model(input_ids=ids).logits
    assert not torch.allclose(before, after), "the adapter did not change the output"
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=3, do_sample=False)
    assert out.shape == (1, ids.shape[1] + 3)


# ------------------------------------------------------------------------------ the worker


def test_worker_is_long_and_realistic():
    text = WORKER.read_text()
    assert len(text.splitlines()) >= 200
    for marker in ("MODEL_REGISTRY", "QUANT_CONFIGS", "MODEL_KWARGS", "GENERATION_PARAMS", "class RagIndex",
                   "def _build_device_map", "merge_and_unload", "def _place_inputs", "logger.exception",
                   "PeftModel.from_pretrained"):
        assert marker in text, marker


def test_worker_tiny_architecture_matches_build_tiny(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMMA4_TINY_DIR", str(tmp_path))
    worker = _load("gpu_example_worker", WORKER)
    assert worker.MODEL_HOME == tmp_path
    assert worker._tiny_config("gemma4-tiny-it").to_dict() == build_tiny.tiny_config().to_dict()
    assert worker.LORA_TARGETS["gemma4"] == build_tiny.LORA_TARGET_REGEX


def test_worker_cpu_fallback_builds_then_serves(worker_run):
    home, proc = worker_run
    assert proc.returncode == 0, proc.stderr[-2000:]  # a worker loop that swallows errors, as in the seed
    assert "Building gemma4-tiny-it" in proc.stderr
    assert (home / "base" / "config.json").is_file()
    for client in ("client-alpha", "client-beta"):  # created on demand, one per client served
        assert (home / "adapters" / client / "adapter_config.json").is_file()
    assert not (home / "adapters" / "client-gamma").exists()
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["scenario"] == "c" and summary["device"] == "cpu"
    results = {r["id"]: r for r in summary["results"]}
    assert list(results) == ["good", "bad", "after"]
    assert results["good"]["ok"] is True and len(results["good"]["tokens"]) == 4
    assert results["good"]["sources"] == ["kb-3", "kb-1"]  # the RAG stub ranked the Q3 documents
    assert results["after"]["ok"] is True and len(results["after"]["tokens"]) == 6  # "creative" params
    assert results["after"]["sources"] == ["kb-2"]


def test_worker_logs_a_failed_request_that_reprobot_can_parse(worker_run):
    _, proc = worker_run
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    bad = next(r for r in summary["results"] if r["id"] == "bad")
    assert bad["ok"] is False and "client-gamma" in bad["error"]
    assert "Worker returned error" in proc.stderr
    # reprobot sees the logged traceback although the process exited 0
    records = parse_tracebacks(proc.stderr)
    assert [r.exc_type for r in records] == ["KeyError"]
    assert "client-gamma" in records[0].message
    assert any(f.func == "_attach_adapter" for f in records[0].frames)


def test_worker_reuses_its_checkpoint_and_validates_the_scenario(worker_run, monkeypatch):
    home, _ = worker_run
    monkeypatch.setenv("GEMMA4_TINY_DIR", str(home))
    worker = _load("gpu_example_worker_reuse", WORKER)
    stamp = (home / "base" / "model.safetensors").stat().st_mtime_ns
    assert worker._ensure_checkpoint("gemma4-tiny-it") == home / "base"
    assert (home / "base" / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt

    monkeypatch.setattr(worker, "REPRO_SCENARIO", "z")
    assert worker.main() == 2
    for scenario, expected in (("c", {"max_memory"}), ("d", {"device_map"}), ("b", set())):
        monkeypatch.setattr(worker, "REPRO_SCENARIO", scenario)
        assert set(worker._adapter_load_kwargs(torch.nn.Linear(2, 2), {"": "cpu"})) == expected
    monkeypatch.setattr(worker, "REPRO_DEVICE", "cuda")
    monkeypatch.setattr(worker, "REPRO_SCENARIO", "c")
    assert worker._build_device_map(True, True) == {"model.vision_tower": "cpu", "model.audio_tower": "cpu", "": 0}
    budget = worker._memory_budget(torch.nn.Linear(64, 64))  # a tiny module has a footprint too
    assert budget["cpu"] == worker.CPU_MEMORY_BUDGET and 0 < budget[0] < 64 * 65 * 4


# ------------------------------------------------------------------------------ the matrix


def test_matrix_result_lines_are_one_line_each():
    matrix = _load("gpu_example_matrix", MATRIX)
    fail = matrix.Result(key="c", status="FAIL", stage="load_adapter", exc_type="RuntimeError",
                         message="Tensor.item() cannot be called on meta tensors",
                         where="bitsandbytes/functional.py:as_dict", seconds=1.25)
    line = fail.line()
    assert "\n" not in line
    assert line.startswith("[  c] FAIL") and "stage=load_adapter" in line and "bitsandbytes/functional.py:as_dict" in line
    assert matrix.Result(key="a", status="PASS", seconds=2).line().startswith("[  a] PASS")
    assert set("abcde") <= set(matrix.SCENARIOS)


def test_matrix_records_the_plan_peft_redispatches_with():
    import inspect

    from peft import peft_model

    matrix = _load("gpu_example_matrix", MATRIX)
    original = peft_model.dispatch_model
    details: dict = {}
    with matrix._recording_peft_redispatch(details):
        assert "offload_index" in inspect.signature(peft_model.dispatch_model).parameters
        layer = torch.nn.Linear(2, 2)
        assert peft_model.dispatch_model(layer, device_map={"": "cpu"}) is layer
    assert peft_model.dispatch_model is original
    assert details["peft_redispatch"] == {"devices": ["cpu"], "on_cpu": [""]}


def test_matrix_refuses_cuda_mode_without_a_gpu(capsys):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible here")
    matrix = _load("gpu_example_matrix", MATRIX)
    assert matrix.main(["--only", "a"]) == 2
    out = capsys.readouterr().out
    assert "== stack:" in out and "transformers=" in out and "peft=" in out
    assert "no CUDA device visible" in out


def test_matrix_launch_reports_crash_and_timeout(tiny):
    matrix = _load("gpu_example_matrix", MATRIX)
    crash = matrix._launch("zz", tiny.root, "cpu", timeout=120)
    assert crash.status == "CRASH" and "KeyError" in crash.message
    slow = matrix._launch("a", tiny.root, "cpu", timeout=0.5)
    assert slow.status == "TIMEOUT"


@pytest.mark.slow
def test_matrix_cpu_harness_runs_scenarios_in_subprocesses(tiny, tmp_path):
    out_json = tmp_path / "matrix.json"
    proc = subprocess.run(
        [sys.executable, str(MATRIX), "--device", "cpu", "--only", "a,c", "--model-dir", str(tiny.root),
         "--json", str(out_json), "--label", "cpu-check"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("== stack [cpu-check]:")
    assert any(line.startswith("[  a] PASS") for line in lines)
    assert any(line.startswith("[  c] PASS") for line in lines)  # no bnb, no split: the same calls succeed
    payload = json.loads(out_json.read_text())
    assert [r["key"] for r in payload["results"]] == ["a", "c"]
    assert all(len(r["details"]["generated"]) == 4 for r in payload["results"])


# ------------------------------------------------------------------------------ GPU (skipped on CI)


def _require_gpu_stack() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: torch.cuda.is_available() is False")
    if importlib.util.find_spec("bitsandbytes") is None:
        pytest.skip("needs bitsandbytes (carry the wheel: examples/gpu_gemma4_bnb/README.md)")


@pytest.mark.gpu
def test_gpu_all_gpu_4bit_adapter_generates(tiny, tmp_path):
    _require_gpu_stack()
    matrix = _load("gpu_example_matrix", MATRIX)
    result = matrix._launch("a", tiny.root, "cuda", timeout=300)
    assert result.status == "PASS", result.traceback
    assert len(result.details["generated"]) == matrix.MAX_NEW_TOKENS


@pytest.mark.gpu
def test_gpu_worker_scenario_c_logs_the_meta_tensor_failure(tmp_path):
    _require_gpu_stack()
    proc = _run_worker({"REPRO_SCENARIO": "c", "GEMMA4_TINY_DIR": str(tmp_path / "tiny_gemma4")}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = parse_tracebacks(proc.stderr)
    assert records, "scenario (c) did not fail on this stack:\n" + proc.stdout
    assert records[0].exc_type == "RuntimeError" and "meta tensors" in records[0].message
    assert any(f.func == "load_adapter" for f in records[0].frames)
