"""Inference worker for the chat backend, serving from a spawn child: Gemma4 in bnb 4-bit, one
LoRA adapter per client.

The shape most serving code has (issue #29): the parent process builds the request queue and
starts the model worker with the spawn start method (CUDA must not be initialised in a forked
child); the child imports the stack, builds/loads the model and serves the queue; every error is
logged by the child with its traceback, and the parent logs the failed results and exits 0.

Modelled on the worker in the forum thread "CPU offloading error scenario": the vision and audio
towers go to the CPU through a device_map, the text tower stays on GPU 0 in 4-bit, and each
client's LoRA adapter is attached with PeftModel.from_pretrained. Requests come from a queue;
every error is logged with its traceback and reported back, and the process exits 0.

Knobs (environment):
  REPRO_SCENARIO  c (default): max_memory passed to the adapter load -> offload inside PEFT
                  d: the base's device_map passed to the adapter load, then generate
                  b: plain adapter load on the split base; a: everything on GPU 0
  REPRO_DEVICE    cuda (default) | cpu: the CPU twin: the same calls without bitsandbytes, the towers
                  offloaded to the CPU and the disk, which fails on CPU in the base's load
                  (ValueError: position_embedding_table is on the meta device)
  GEMMA4_TINY_DIR where the tiny checkpoint lives; built on first use (default: ./tiny_gemma4)
  REPRO_REQUESTS  a JSON file with a list of requests to serve instead of the built-in ones
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import queue
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import (
    BitsAndBytesConfig,
    Gemma4AudioConfig,
    Gemma4Config,
    Gemma4ForConditionalGeneration,
    Gemma4TextConfig,
    Gemma4VisionConfig,
)

logging.basicConfig(
    level=logging.INFO,
    format="%(asctime)s | Worker (%(process)d) | %(levelname)s | %(message)s",
)
logger = logging.getLogger("inference_worker")

REPRO_SCENARIO = os.environ.get("REPRO_SCENARIO", "c").strip().lower()
REPRO_DEVICE = os.environ.get("REPRO_DEVICE", "cuda").strip().lower()
MODEL_HOME = Path(os.environ.get("GEMMA4_TINY_DIR") or Path(__file__).resolve().with_name("tiny_gemma4"))
OFFLOAD_DIR = MODEL_HOME / "offload_temp"

# Share of the loaded model's footprint that GPU 0 may keep when the adapter load re-plans the
# placement; the rest of the card belongs to the RAG embedder in production.
GPU_MEMORY_FRACTION = float(os.environ.get("REPRO_GPU_FRACTION", "0.6"))
CPU_MEMORY_BUDGET = "8GiB"

MODEL_REGISTRY = {
    "gemma4-tiny-it": str(MODEL_HOME / "base"),
    "gemma4-e4b-it": "unsloth/gemma-4-E4B-it",  # production; never loaded by this example
    "gemma4-e2b-it": "unsloth/gemma-4-E2B-it",
}

# Architectures this worker can materialise locally when a checkpoint folder is missing.
TINY_ARCHITECTURES = {
    "gemma4-tiny-it": {
        "text": dict(
            vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2,
            num_key_value_heads=1, head_dim=32, global_head_dim=32, vocab_size_per_layer_input=128,
            hidden_size_per_layer_input=16, num_kv_shared_layers=2, sliding_window=32,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        ),
        "vision": dict(
            hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
            head_dim=16, position_embedding_size=64,
        ),
        "audio": dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, output_proj_dims=32),
    },
}

QUANT_CONFIGS = {
    "gemma4-tiny-it": BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
        llm_int8_enable_fp32_cpu_offload=True,
    ),
    "gemma4-e4b-it": BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
        llm_int8_enable_fp32_cpu_offload=True,
        llm_int8_skip_modules=["model.vision_tower", "model.audio_tower", "lm_head"],
    ),
}

# attn_implementation="sdpa" (the thread's setting) is refused for Gemma4AudioModel by current
# transformers at load time, so the library default is used.
MODEL_KWARGS = {
    "gemma4-tiny-it": {"dtype": torch.bfloat16, "trust_remote_code": False, "low_cpu_mem_usage": False},
    "gemma4-e4b-it": {"dtype": torch.bfloat16, "trust_remote_code": False, "low_cpu_mem_usage": True},
}

GENERATION_PARAMS = {
    "default": {"max_new_tokens": 4, "do_sample": False, "use_cache": True},
    "creative": {"max_new_tokens": 6, "do_sample": True, "temperature": 0.9, "top_p": 0.95, "use_cache": True},
}

LORA_TARGETS = {
    # Gemma4's vision/audio towers wrap projections in Gemma4ClippableLinear, which PEFT cannot
    # target (peft#3129); the text tower's plain projections are safe.
    "gemma4": r".*language_model\.layers\.\d+\.(self_attn\.(q_proj|k_proj|v_proj|o_proj)|mlp\.(gate_proj|up_proj|down_proj))",
}

LORA_SOURCES = {
    "client-alpha": "adapters/client-alpha",
    "client-beta": "adapters/client-beta",
}

SUPPORTS = {"gemma4-tiny-it": {"image": True, "audio": True}, "gemma4-e4b-it": {"image": True, "audio": True}}

DEFAULT_REQUESTS = [
    {"id": "req-1", "model": "gemma4-tiny-it", "client": "client-alpha", "prompt": "What changed in the Q3 report?",
     "params": "default"},
]

_MODEL_CACHE: dict[tuple[str, str], torch.nn.Module] = {}


@dataclass
class Document:
    doc_id: str
    text: str
    tags: list[str] = field(default_factory=list)


class RagIndex:
    """Keyword retrieval over a handful of in-memory documents (the real one is a vector DB)."""

    def __init__(self, documents: list[Document]):
        self.documents = documents

    def retrieve(self, query: str, k: int = 2) -> list[Document]:
        words = set(re.findall(r"[a-z0-9]+", query.lower()))
        scored = [(len(words & set(re.findall(r"[a-z0-9]+", d.text.lower()))), d) for d in self.documents]
        scored.sort(key=lambda pair: pair[0], reverse=True)
        return [doc for score, doc in scored[:k] if score > 0]


RAG_INDEX = RagIndex(
    [
        Document("kb-1", "The Q3 report shows revenue up 4 percent and churn down.", ["finance"]),
        Document("kb-2", "Support hours are 8 to 18 on weekdays.", ["support"]),
        Document("kb-3", "The report template changed in Q3: one page per region.", ["finance", "templates"]),
    ]
)


def build_prompt(question: str, documents: list[Document]) -> str:
    context = "\n".join(f"[{d.doc_id}] {d.text}" for d in documents)
    return f"<context>\n{context}\n</context>\n<question>{question}</question>"


def encode_prompt(text: str, vocab_size: int, max_len: int = 16) -> list[int]:
    """Stand-in for the tokenizer: stable ids below the tiny vocabulary, BOS first."""
    ids = [2] + [3 + (ord(ch) % (vocab_size - 3)) for ch in text[-(max_len - 1):]]
    return ids[:max_len]


def _tiny_config(model_id: str) -> Gemma4Config:
    arch = TINY_ARCHITECTURES[model_id]
    return Gemma4Config(
        text_config=Gemma4TextConfig(**arch["text"]),
        vision_config=Gemma4VisionConfig(**arch["vision"]),
        audio_config=Gemma4AudioConfig(**arch["audio"]),
    )


def _ensure_checkpoint(model_id: str) -> Path:
    """Materialise the tiny checkpoint the first time it is needed (production pulls from the hub)."""
    base_dir = Path(MODEL_REGISTRY[model_id])
    if not (base_dir / "config.json").is_file():
        logger.info("Building %s into %s", model_id, base_dir)
        torch.manual_seed(0)
        Gemma4ForConditionalGeneration(_tiny_config(model_id)).save_pretrained(base_dir)
    return base_dir


def _ensure_adapter(model_id: str, client: str) -> Path:
    """Each client's LoRA, trained elsewhere in production; here initialised locally, once."""
    lora_path = MODEL_HOME / LORA_SOURCES[client]
    if not (lora_path / "adapter_config.json").is_file():
        logger.info("Creating adapter %s into %s", client, lora_path)
        torch.manual_seed(sorted(LORA_SOURCES).index(client) + 1)
        lora = LoraConfig(r=8, lora_alpha=16, target_modules=LORA_TARGETS["gemma4"], lora_dropout=0.0,
                          bias="none", task_type="CAUSAL_LM", init_lora_weights=False)
        get_peft_model(Gemma4ForConditionalGeneration(_tiny_config(model_id)), lora).save_pretrained(lora_path)
    return lora_path


def _quant_config_for(model_id: str) -> BitsAndBytesConfig | None:
    if REPRO_DEVICE == "cpu":
        return None  # bitsandbytes 4-bit needs the GPU path this fallback avoids
    return QUANT_CONFIGS.get(model_id)


def _build_device_map(supports_image: bool, supports_audio: bool) -> dict[str, int | str]:
    """Towers the request may need go to the CPU to leave VRAM for the KV cache."""
    main: int | str = 0 if REPRO_DEVICE == "cuda" else "cpu"
    if REPRO_SCENARIO == "a":
        return {"": main}
    device_map: dict[str, int | str] = {}
    if supports_image:
        # the CPU twin (REPRO_DEVICE=cpu) offloads the vision tower to disk, as the GPU run offloads
        # it to the CPU: transformers' load then fails in accelerate's dispatch (a meta buffer)
        device_map["model.vision_tower"] = "cpu" if REPRO_DEVICE == "cuda" else "disk"
    if supports_audio:
        device_map["model.audio_tower"] = "cpu"
    device_map[""] = main
    return device_map


def _footprint_bytes(model: torch.nn.Module) -> int:
    if hasattr(model, "get_memory_footprint"):
        return int(model.get_memory_footprint())
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def _memory_budget(model: torch.nn.Module) -> dict[int | str, int | str]:
    footprint = _footprint_bytes(model)
    if REPRO_DEVICE == "cpu":
        return {"cpu": CPU_MEMORY_BUDGET}
    return {0: max(1, int(footprint * GPU_MEMORY_FRACTION)), "cpu": CPU_MEMORY_BUDGET}


def _adapter_load_kwargs(base_model: torch.nn.Module, device_map: dict[str, int | str]) -> dict[str, object]:
    if REPRO_SCENARIO == "c":
        return {"max_memory": _memory_budget(base_model)}
    if REPRO_SCENARIO == "d":
        return {"device_map": device_map}
    return {}


def _attach_adapter(base_model, model_id: str, client: str, device_map: dict[str, int | str]):
    lora_path = _ensure_adapter(model_id, client)
    if isinstance(base_model, PeftModel):
        base_model = base_model.merge_and_unload()
    model = PeftModel.from_pretrained(
        base_model,
        lora_path,
        adapter_name=client,
        is_trainable=False,
        **_adapter_load_kwargs(base_model, device_map),
    )
    model.eval()
    return model


def _worker_load_model(model_id: str, client: str, supports_image: bool, supports_audio: bool):
    key = (model_id, client)
    if key in _MODEL_CACHE:
        return _MODEL_CACHE[key]
    checkpoint = _ensure_checkpoint(model_id)
    device_map = _build_device_map(supports_image, supports_audio)
    kwargs = dict(MODEL_KWARGS[model_id])
    quant_config = _quant_config_for(model_id)
    if quant_config is not None:
        kwargs["quantization_config"] = quant_config
    base_model = Gemma4ForConditionalGeneration.from_pretrained(
        checkpoint,
        device_map=device_map,
        offload_folder=str(OFFLOAD_DIR),
        **kwargs,
    )
    logger.info("Base %s loaded; hf_device_map=%s", model_id, getattr(base_model, "hf_device_map", None))
    model = _attach_adapter(base_model, model_id, client, device_map)
    model.config.use_cache = True
    _MODEL_CACHE[key] = model
    return model


def get_input_embedding_device(model) -> torch.device:
    candidates = [model, getattr(model, "base_model", None), getattr(getattr(model, "base_model", None), "model", None)]
    for obj in candidates:
        try:
            weight = obj.get_input_embeddings().weight
        except AttributeError:
            continue
        if weight.device.type != "meta":
            return weight.device
    return torch.device("cuda:0" if REPRO_DEVICE == "cuda" else "cpu")


def _place_inputs(model, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    device = get_input_embedding_device(model)
    return {key: value.to(device) if torch.is_tensor(value) else value for key, value in inputs.items()}


def _generate(model, prompt: str, params_name: str) -> list[int]:
    vocab_size = model.config.get_text_config().vocab_size
    ids = torch.tensor([encode_prompt(prompt, vocab_size)])
    inputs = _place_inputs(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    params = GENERATION_PARAMS[params_name]
    with torch.no_grad():
        outputs = model.generate(**inputs, **params)
    return outputs[0, ids.shape[1]:].tolist()


def handle_request(request: dict) -> dict:
    model_id = request["model"]
    supports = SUPPORTS.get(model_id, {"image": False, "audio": False})
    documents = RAG_INDEX.retrieve(request["prompt"])
    prompt = build_prompt(request["prompt"], documents)
    model = _worker_load_model(model_id, request["client"], supports["image"], supports["audio"])
    started = time.monotonic()
    tokens = _generate(model, prompt, request.get("params", "default"))
    return {"id": request["id"], "ok": True, "tokens": tokens, "sources": [d.doc_id for d in documents],
            "seconds": round(time.monotonic() - started, 3)}


def inference_worker_loop(requests: queue.Queue[dict | None], results: queue.Queue[dict]) -> None:
    while True:
        request = requests.get()
        if request is None:
            break
        try:
            results.put(handle_request(request))
        except Exception as e:
            logger.exception("Worker error: %s", e)
            results.put({"id": request.get("id"), "ok": False, "error": f"Worker error: {e}"})


def load_requests() -> list[dict]:
    path = os.environ.get("REPRO_REQUESTS")
    if not path:
        return list(DEFAULT_REQUESTS)
    return json.loads(Path(path).read_text())


def collect(results, expected: int, timeout: float = 600.0) -> list[dict]:
    summary = []
    for _ in range(expected):
        try:
            summary.append(results.get(timeout=timeout))
        except queue.Empty:
            logger.error("worker stopped answering after %d results", len(summary))
            break
    return summary


def main() -> int:
    if REPRO_SCENARIO not in {"a", "b", "c", "d"}:
        logger.error("REPRO_SCENARIO must be one of a, b, c, d (got %r)", REPRO_SCENARIO)
        return 2
    logger.info("scenario=%s device=%s torch=%s", REPRO_SCENARIO, REPRO_DEVICE, torch.__version__)
    ctx = mp.get_context("spawn")
    requests = ctx.Queue()
    results = ctx.Queue()
    pending = load_requests()
    worker = ctx.Process(target=inference_worker_loop, args=(requests, results), name="model-worker")
    worker.start()
    for request in pending:
        requests.put(request)
    requests.put(None)
    summary = collect(results, len(pending))
    worker.join()
    for result in summary:
        if not result["ok"]:
            logger.error("Worker returned error: %s", result["error"])
    print(json.dumps({"scenario": REPRO_SCENARIO, "device": REPRO_DEVICE, "exitcode": worker.exitcode,
                      "results": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
