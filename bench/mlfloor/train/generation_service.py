"""A toy text-generation service: requests arrive on a queue, each names a model and a sampling
preset; models are built once and cached; replies are collected per request id.
"""
from __future__ import annotations

import logging
import os
import queue
import sys
import time
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel

log = logging.getLogger("gen-service")

MODEL_REGISTRY = {
    "gpt2-nano": dict(n_layer=2, n_embd=32, n_head=2, vocab_size=80, n_positions=64),
    "gpt2-nano-wide": dict(n_layer=1, n_embd=64, n_head=4, vocab_size=80, n_positions=64),
}

PRESETS: dict[str, dict[str, Any]] = {
    "default": dict(max_new_tokens=6, do_sample=True, top_k=20, temperature=0.9),
    "precise": dict(max_new_tokens=6, do_sample=False, num_beams=1),
    "creative": dict(max_new_tokens=8, do_sample=True, top_p=0.95, temperature=1.3),
}

PAD_ID = 0
BASE_GENERATION = GenerationConfig(pad_token_id=PAD_ID, eos_token_id=2, bos_token_id=1)


@dataclass
class Request:
    rid: str
    model: str
    prompt_ids: list
    preset: str = "default"
    overrides: dict = field(default_factory=dict)


@dataclass
class Reply:
    rid: str
    outputs: list
    latency_ms: float


class ModelCache:
    def __init__(self, registry):
        self.registry = registry
        self._models: dict[str, GPT2LMHeadModel] = {}

    def get(self, name: str) -> GPT2LMHeadModel:
        if name not in self._models:
            torch.manual_seed(0)
            cfg = GPT2Config(**self.registry[name], bos_token_id=1, eos_token_id=2, pad_token_id=PAD_ID)
            self._models[name] = GPT2LMHeadModel(cfg).eval()
            log.info("loaded %s (%d params)", name, sum(p.numel() for p in self._models[name].parameters()))
        return self._models[name]


def generation_params(req: Request) -> dict:
    params = dict(PRESETS[req.preset])
    params.update(req.overrides)
    return params


def handle(req: Request, cache: ModelCache) -> Reply:
    model = cache.get(req.model)
    params = generation_params(req)
    input_ids = torch.tensor([req.prompt_ids])
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                             generation_config=BASE_GENERATION, **params)
    texts = out[:, input_ids.shape[1]:].tolist()
    return Reply(req.rid, texts, (time.perf_counter() - t0) * 1000)


def incoming() -> "queue.Queue[Request]":
    q: "queue.Queue[Request]" = queue.Queue()
    q.put(Request("r1", "gpt2-nano", [1, 5, 9, 13]))
    q.put(Request("r2", "gpt2-nano-wide", [1, 7, 7, 3], preset="creative"))
    q.put(Request("r3", "gpt2-nano", [1, 4, 8], preset="precise", overrides={"num_return_sequences": 3}))
    q.put(Request("r4", "gpt2-nano", [1, 2, 3], preset="default", overrides={"max_new_tokens": 4}))
    return q


def serve(q, cache) -> dict:
    replies = {}
    while not q.empty():
        req = q.get()
        log.info("request %s -> %s/%s", req.rid, req.model, req.preset)
        reply = handle(req, cache)
        replies[req.rid] = reply
        log.info("reply %s: %d outputs in %.1f ms", req.rid, len(reply.outputs), reply.latency_ms)
        q.task_done()
    return replies


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    replies = serve(incoming(), ModelCache(MODEL_REGISTRY))
    log.info("served %d requests", len(replies))
    return 0


if __name__ == "__main__":
    sys.exit(main())
