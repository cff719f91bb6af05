"""Which of the forum thread's Gemma4 + bnb 4-bit + PEFT failures reproduce on this stack?

Builds the tiny Gemma4 of build_tiny.py, then runs each scenario of the seed thread in its own
subprocess (a crash or a hang in one cannot take the matrix down) and prints one line per
scenario: PASS, or the stage that failed with the exception type, the first line of its message
and the innermost library frame. The stack versions and the GPU come first, a JSON file with the
full tracebacks last.

    python repro_matrix.py                      # all scenarios on cuda:0
    python repro_matrix.py --only a,c,d --json out.json
    python repro_matrix.py --device cpu         # same code paths, no bnb, CPU maps (harness check)

Scenario letters follow the brief of issue 8: (a) all-GPU, (b) split map + plain adapter load,
(c) split map + small max_memory on the adapter load, (d) the base's device_map passed to the
adapter load, (e) device_map="auto" with a small max_memory on the base; f* are the thread's
other suggestions (offload kwargs, double quant off, the seed's projector key, no adapter).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT_MARK = "@@MATRIX-RESULT@@"
STACK = ("torch", "transformers", "peft", "accelerate", "bitsandbytes", "safetensors", "huggingface_hub")

# Share of the 4-bit base model's footprint granted to GPU 0 where a scenario passes max_memory.
# Planned on CPU with accelerate's own infer_auto_device_map over the tiny model's 4-bit sizes:
# from about 0.35 to 0.9 the plan keeps something on GPU 0 and offloads bnb Linear4bit decoder
# layers to the CPU, which is what the seed's full 12 GB card did to the real model; 0.6 keeps
# the vision tower, embeddings, lm_head and decoder layer 0 on the GPU.
GPU_FRACTION = float(os.environ.get("REPRO_GPU_FRACTION", "0.6"))
CPU_BUDGET = "8GiB"
PROMPT_IDS = [2, 17, 33, 5, 9, 11, 40, 7]
MAX_NEW_TOKENS = 4


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    base_map: str  # "all", "split", "seed_split", "auto"
    adapter: str | None  # None: no adapter; "plain", "max_memory", "device_map", "offload_kwargs"
    double_quant: bool = True
    # None: the library's default. The seed's MODEL_KWARGS say "sdpa", which current transformers
    # refuses for Gemma4AudioModel at load time, so only scenario f5 passes it.
    attn_implementation: str | None = None
    gpu_fraction: float | None = None  # None: GPU_FRACTION
    expect: str = ""  # what the seed thread reported, for the reader


SCENARIOS: dict[str, Scenario] = {
    s.key: s
    for s in (
        Scenario("a", "all-GPU {'':0} 4-bit + PeftModel.from_pretrained + generate", "all", "plain", expect="PASS"),
        Scenario("b", "split map (towers on cpu) + PeftModel.from_pretrained + generate", "split", "plain",
                 expect="seed: meta .item() or Params4bit _is_hf_initialized at adapter load"),
        Scenario("c", "split map + PeftModel.from_pretrained(max_memory=small) + generate", "split", "max_memory",
                 expect="seed: RuntimeError Tensor.item() cannot be called on meta tensors"),
        Scenario("c40", "as (c) with 0.4 of the footprint for GPU 0", "split", "max_memory", gpu_fraction=0.4,
                 expect="planned on CPU: the whole text tower offloaded"),
        Scenario("c85", "as (c) with 0.85 of the footprint for GPU 0", "split", "max_memory", gpu_fraction=0.85,
                 expect="planned on CPU: only the last decoder layer offloaded"),
        Scenario("d", "split map + PeftModel.from_pretrained(device_map=same map) + generate", "split", "device_map",
                 expect="seed: KeyError 22 in Gemma4 shared_kv_states during generate"),
        Scenario("e", "device_map='auto' + small max_memory on the base + adapter + generate", "auto", "plain",
                 expect="seed: meta .item() while loading the base"),
        Scenario("f1", "split map + adapter with offload_dir/offload_buffers/ephemeral_gpu_offload", "split",
                 "offload_kwargs", expect="forum's suggested workaround"),
        Scenario("f2", "as (c) with bnb_4bit_use_double_quant=False", "split", "max_memory", double_quant=False,
                 expect="forum: does the nested-offset failure go away?"),
        Scenario("f3", "seed's map incl. model.multi_modal_projector (absent in Gemma4) + adapter", "seed_split",
                 "plain", expect="does the unknown key matter?"),
        Scenario("f4", "split map, no adapter, generate", "split", None, expect="PASS"),
        Scenario("f5", "as (a) with the seed's attn_implementation='sdpa'", "all", "plain", attn_implementation="sdpa",
                 expect="seed (transformers 5.6.2): loads"),
    )
}


@dataclass
class Result:
    key: str
    status: str  # PASS | FAIL | CRASH | TIMEOUT | ERROR
    stage: str = ""
    exc_type: str = ""
    message: str = ""
    where: str = ""  # innermost library frame, "package/file.py:function"
    seconds: float = 0.0
    details: dict = field(default_factory=dict)
    traceback: str = ""

    def line(self) -> str:
        head = f"[{self.key:>3}] {self.status:<7}"
        if self.status == "PASS":
            return f"{head} ({self.seconds:.1f}s) {SCENARIOS[self.key].title if self.key in SCENARIOS else ''}".rstrip()
        if self.status in ("FAIL", "ERROR"):
            where = f" @ {self.where}" if self.where else ""
            return f"{head} stage={self.stage} {self.exc_type}: {self.message}{where} ({self.seconds:.1f}s)"
        return f"{head} {self.message} ({self.seconds:.1f}s)"


# --------------------------------------------------------------------------------------------
# The stack


def stack_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in STACK:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def device_report() -> dict[str, str]:
    """GPU, CUDA and the bnb native library that loads; never raises (it is printed, not judged)."""
    report: dict[str, str] = {}
    try:
        import torch

        report["torch_cuda"] = str(torch.version.cuda)
        report["cuda_available"] = str(torch.cuda.is_available())
        if torch.cuda.is_available():
            report["gpu"] = torch.cuda.get_device_name(0)
            report["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    except Exception as exc:  # noqa: BLE001 - reported, not judged
        report["torch_error"] = f"{type(exc).__name__}: {exc}"
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=False,
        )
        if out.returncode == 0:
            report["nvidia_smi"] = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        import bitsandbytes as bnb

        lib = getattr(getattr(bnb, "cextension", None), "lib", None)
        name = getattr(lib, "_name", None) or getattr(getattr(lib, "_lib", None), "_name", None)
        report["bnb_lib"] = Path(str(name)).name if name else repr(lib)[:120]
    except Exception as exc:  # noqa: BLE001 - a broken bnb install is a finding too
        report["bnb_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return report


# --------------------------------------------------------------------------------------------
# One scenario, inside its own process


def _innermost_library_frame(tb: traceback.StackSummary) -> str:
    for frame in reversed(tb):
        path = frame.filename.replace("\\", "/")
        if "site-packages/" in path or "dist-packages/" in path:
            rel = path.split("-packages/", 1)[1]
            return f"{rel}:{frame.name}"
    return ""


def _maps(device: str) -> dict[str, object]:
    main: object = 0 if device == "cuda" else "cpu"
    return {
        "all": {"": main},
        "split": {"model.vision_tower": "cpu", "model.audio_tower": "cpu", "": main},
        "seed_split": {
            "model.vision_tower": "cpu",
            "model.multi_modal_projector": "cpu",
            "model.audio_tower": "cpu",
            "": main,
        },
        "auto": "auto",
    }


def _quant_config(device: str, double_quant: bool):
    if device != "cuda":
        return None  # the CPU harness check runs the same calls without bnb
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=double_quant,
        bnb_4bit_compute_dtype=torch.bfloat16,
        llm_int8_enable_fp32_cpu_offload=True,
    )


def _budget(footprint: int, device: str, fraction: float | None = None) -> dict[object, object]:
    if device == "cuda":
        return {0: max(1, int(footprint * (GPU_FRACTION if fraction is None else fraction))), "cpu": CPU_BUDGET}
    return {"cpu": CPU_BUDGET}


def _device_summary(model) -> dict[str, int]:
    counts: dict[str, int] = {}
    for device in (getattr(model, "hf_device_map", None) or {}).values():
        counts[str(device)] = counts.get(str(device), 0) + 1
    return counts


@contextlib.contextmanager
def _recording_peft_redispatch(details: dict):
    """Note the device_map PEFT's load_adapter re-plans, so a failure line can say what moved.

    PEFT calls accelerate's dispatch_model through its own module's name; wrapping that name
    records the plan and leaves the call (and its traceback's library frames) unchanged.
    """
    from peft import peft_model

    original = peft_model.dispatch_model

    @functools.wraps(original)  # PEFT inspects the signature for `offload_index`
    def recording(model, device_map=None, *args, **kwargs):
        plan = dict(device_map or {})
        details["peft_redispatch"] = {
            "devices": sorted({str(v) for v in plan.values()}),
            "on_cpu": sorted(k.replace("base_model.model.", "") for k, v in plan.items() if v == "cpu")[:12],
        }
        return original(model, device_map, *args, **kwargs)

    peft_model.dispatch_model = recording
    try:
        yield
    finally:
        peft_model.dispatch_model = original


def run_scenario(key: str, model_root: Path, device: str) -> Result:
    scenario = SCENARIOS[key]  # an unknown key fails here, before the slow imports

    import torch
    from transformers import Gemma4ForConditionalGeneration

    base_dir, adapter_dir = model_root / "base", model_root / "adapter"
    result = Result(key=key, status="PASS")
    stage = "load_base"
    started = time.monotonic()
    offload_dir = tempfile.mkdtemp(prefix=f"matrix-{key}-")
    try:
        torch.manual_seed(0)
        quant = _quant_config(device, scenario.double_quant)
        kwargs: dict[str, object] = {"dtype": torch.bfloat16, "low_cpu_mem_usage": False}
        if scenario.attn_implementation:
            kwargs["attn_implementation"] = scenario.attn_implementation
        if quant is not None:
            kwargs["quantization_config"] = quant
        device_map = _maps(device)[scenario.base_map]
        if scenario.base_map == "auto":
            # The budget needs the 4-bit footprint, which only a load tells: load all-GPU, measure, drop.
            probe = Gemma4ForConditionalGeneration.from_pretrained(base_dir, device_map=_maps(device)["all"], **kwargs)
            footprint = probe.get_memory_footprint()
            del probe
            if device == "cuda":
                torch.cuda.empty_cache()
            kwargs["max_memory"] = _budget(footprint, device)
            result.details["base_max_memory"] = {str(k): v for k, v in kwargs["max_memory"].items()}
        base = Gemma4ForConditionalGeneration.from_pretrained(
            base_dir, device_map=device_map, offload_folder=offload_dir, **kwargs
        )
        result.details["base_devices"] = _device_summary(base)
        footprint = base.get_memory_footprint()
        result.details["footprint_bytes"] = footprint
        model = base

        if scenario.adapter is not None:
            stage = "load_adapter"
            from peft import PeftModel

            adapter_kwargs: dict[str, object] = {}
            if scenario.adapter == "max_memory":
                adapter_kwargs["max_memory"] = _budget(footprint, device, scenario.gpu_fraction)
                result.details["adapter_max_memory"] = {str(k): v for k, v in adapter_kwargs["max_memory"].items()}
            elif scenario.adapter == "device_map":
                adapter_kwargs["device_map"] = device_map
            elif scenario.adapter == "offload_kwargs":
                adapter_kwargs.update(offload_dir=offload_dir, offload_buffers=True, ephemeral_gpu_offload=True)
                if device == "cuda":
                    adapter_kwargs["torch_device"] = "cuda:0"
            with _recording_peft_redispatch(result.details):
                model = PeftModel.from_pretrained(base, adapter_dir, is_trainable=False, **adapter_kwargs)
            result.details["adapter_devices"] = _device_summary(model)

        stage = "generate"
        embed_device = model.get_input_embeddings().weight.device
        if embed_device.type == "meta":  # offloaded embeddings: hooks bring them to the execution device
            embed_device = torch.device("cuda:0" if device == "cuda" else "cpu")
        ids = torch.tensor([PROMPT_IDS], device=embed_device)
        with torch.no_grad():
            out = model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_NEW_TOKENS, do_sample=False
            )
        result.details["generated"] = out[0, len(PROMPT_IDS):].tolist()
    except Exception as exc:  # noqa: BLE001 - the matrix reports every failure, whatever its type
        result.status = "FAIL"
        result.stage = stage
        result.exc_type = type(exc).__qualname__
        text = str(exc).strip()
        result.message = text.splitlines()[0][:300] if text else ""
        result.where = _innermost_library_frame(traceback.extract_tb(exc.__traceback__))
        result.traceback = traceback.format_exc()
    result.seconds = time.monotonic() - started
    return result


# --------------------------------------------------------------------------------------------
# The driver


def _child(args: argparse.Namespace) -> int:
    result = run_scenario(args.run_one, Path(args.model_dir), args.device)
    print(RESULT_MARK + json.dumps(asdict(result)), flush=True)
    return 0


def _launch(key: str, model_dir: Path, device: str, timeout: float) -> Result:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--run-one", key, "--model-dir", str(model_dir), "--device", device]
    started = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, start_new_session=True, check=False
        )
    except subprocess.TimeoutExpired:
        return Result(key=key, status="TIMEOUT", message=f"no result within {timeout:.0f}s", seconds=timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            return Result(**json.loads(line[len(RESULT_MARK):]))
    tail = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return Result(
        key=key,
        status="CRASH",
        message=f"rc={proc.returncode}: {tail[-1][:300] if tail else 'no output'}",
        seconds=time.monotonic() - started,
        traceback="\n".join(tail[-60:]),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated scenario keys (default: all)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--model-dir", type=Path, default=None, help="tiny model folder (built if absent)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per scenario")
    parser.add_argument("--jobs", type=int, default=3, help="scenarios run at once (the model is tiny)")
    parser.add_argument("--json", type=Path, default=None, help="write all results, tracebacks included")
    parser.add_argument("--label", default="", help="a name for this stack in the output")
    parser.add_argument("--run-one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.run_one:
        return _child(args)

    keys = [k.strip() for k in args.only.split(",") if k.strip()] or list(SCENARIOS)
    unknown = [k for k in keys if k not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")

    versions, dev = stack_versions(), device_report()
    label = f" [{args.label}]" if args.label else ""
    print(f"== stack{label}: " + " ".join(f"{k}={v}" for k, v in versions.items()), flush=True)
    print(f"== device{label}: " + " | ".join(f"{k}={v}" for k, v in dev.items()), flush=True)
    if args.device == "cuda" and dev.get("cuda_available") != "True":
        print("== no CUDA device visible: nothing to run (use --device cpu for the harness check)")
        return 2

    model_dir = args.model_dir or Path(tempfile.mkdtemp(prefix="tiny-gemma4-")) / "tiny"
    build = subprocess.run(
        [sys.executable, str(HERE / "build_tiny.py"), str(model_dir)], capture_output=True, text=True, timeout=300,
        check=False,
    )
    if build.returncode != 0:
        lines = [ln for ln in build.stderr.splitlines() if ln.strip()]
        print(f"== build_tiny failed rc={build.returncode}: {lines[-1] if lines else ''}")
        return 1

    results: list[Result] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(_launch, k, model_dir, args.device, args.timeout): k for k in keys}
        for future in concurrent.futures.as_completed(futures):
            results.append(future.result())
    results.sort(key=lambda r: keys.index(r.key))
    for r in results:
        print(r.line(), flush=True)
        if r.details:
            print(f"       details: {json.dumps(r.details, sort_keys=True)}", flush=True)

    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"label": args.label, "stack": versions, "device": dev, "gpu_fraction": GPU_FRACTION,
                   "results": [asdict(r) for r in results]}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
