"""Tiny chat-completion server: a spawn worker process serves prompts from a request queue.

The parent builds (or refreshes) a small checkpoint folder with the chat markers registered in the
tokenizer, configures the runtime environment, starts one worker per device and feeds it requests.
The worker loads the checkpoint, formats each request with the chat markers and greedily decodes.

    python queue_chat_server.py --ckpt-dir /tmp/chat_ckpt --num-requests 3
"""
from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import queue
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast)

logger = logging.getLogger("chat_server")

CHAT_MARKERS = ["<|user|>", "<|assistant|>", "<|end|>"]
BASE_WORDS = ("the a cat dog sat ran on under mat rug fast slowly and then it was "
              "hello how are you today fine good bad what is your name my").split()


@dataclass
class ServerConfig:
    ckpt_dir: str
    num_requests: int = 3
    max_new_tokens: int = 6
    hidden_size: int = 32
    num_layers: int = 2
    num_heads: int = 4
    omp_threads: int = 1
    request_timeout: float = 60.0
    prompts: list = field(default_factory=lambda: [
        "hello how are you", "what is your name", "the cat sat on the mat"])


def parse_args() -> ServerConfig:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ckpt-dir", default=os.path.join(tempfile.gettempdir(), "chat_ckpt_demo"))
    p.add_argument("--num-requests", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=6)
    p.add_argument("--hidden-size", type=int, default=32)
    p.add_argument("--omp-threads", type=int, default=1)
    a = p.parse_args()
    return ServerConfig(ckpt_dir=a.ckpt_dir, num_requests=a.num_requests,
                        max_new_tokens=a.max_new_tokens, hidden_size=a.hidden_size,
                        omp_threads=a.omp_threads)


def build_tokenizer() -> PreTrainedTokenizerFast:
    specials = ["<pad>", "<unk>", "<s>", "</s>"]
    vocab = {tok: i for i, tok in enumerate(specials + BASE_WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>",
                                   bos_token="<s>", eos_token="</s>")


def build_model(cfg: ServerConfig, vocab_size: int) -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=cfg.hidden_size,
                         intermediate_size=cfg.hidden_size * 2, num_hidden_layers=cfg.num_layers,
                         num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_heads,
                         max_position_embeddings=128, pad_token_id=0, bos_token_id=2,
                         eos_token_id=3)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


def export_checkpoint(cfg: ServerConfig) -> Path:
    """Write tokenizer + model to cfg.ckpt_dir; the chat markers go into the tokenizer."""
    out = Path(cfg.ckpt_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    model = build_model(cfg, vocab_size=len(tokenizer))
    added = tokenizer.add_special_tokens({"additional_special_tokens": CHAT_MARKERS})
    logger.info("registered %d chat markers, tokenizer size now %d", added, len(tokenizer))
    tokenizer.save_pretrained(out)
    model.save_pretrained(out)
    logger.info("checkpoint written to %s", out)
    return out


def format_prompt(text: str) -> str:
    return f"<|user|> {text} <|end|> <|assistant|>"


def serve(ckpt_dir: str, device: str, requests: "mp.Queue", responses: "mp.Queue") -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [worker %(process)d] %(message)s")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    tokenizer = AutoTokenizer.from_pretrained(ckpt_dir)
    model = AutoModelForCausalLM.from_pretrained(ckpt_dir).to(device).eval()
    logger.info("worker ready on %s (vocab %d)", device, model.config.vocab_size)
    while True:
        req = requests.get()
        if req is None:
            logger.info("sentinel received, shutting down")
            break
        rid, text, max_new = req["id"], req["text"], req["max_new_tokens"]
        try:
            enc = tokenizer(format_prompt(text), return_tensors="pt").to(device)
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=max_new, do_sample=False,
                                     pad_token_id=tokenizer.pad_token_id)
            completion = tokenizer.decode(out[0, enc["input_ids"].shape[1]:],
                                          skip_special_tokens=True)
            responses.put({"id": rid, "ok": True, "text": completion})
        except Exception:
            logger.exception("request %s failed", rid)
            responses.put({"id": rid, "ok": False, "text": ""})


def configure_runtime(cfg: ServerConfig) -> str:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["OMP_NUM_THREADS"] = str(cfg.omp_threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    logger.info("serving on %s with %s OMP threads", device, cfg.omp_threads)
    return device


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [parent] %(message)s")
    cfg = parse_args()
    device = configure_runtime(cfg)
    ckpt = export_checkpoint(cfg)

    ctx = mp.get_context("spawn")
    requests, responses = ctx.Queue(), ctx.Queue()
    worker = ctx.Process(target=serve, args=(str(ckpt), device, requests, responses), daemon=True)
    worker.start()

    t0 = time.time()
    for i in range(cfg.num_requests):
        requests.put({"id": i, "text": cfg.prompts[i % len(cfg.prompts)],
                      "max_new_tokens": cfg.max_new_tokens})
    results = {}
    for _ in range(cfg.num_requests):
        try:
            r = responses.get(timeout=cfg.request_timeout)
        except queue.Empty:
            logger.warning("timed out waiting for responses")
            break
        results[r["id"]] = r
    requests.put(None)
    worker.join(timeout=30)

    ok = sum(r["ok"] for r in results.values())
    logger.info("%d/%d requests served in %.1fs", ok, cfg.num_requests, time.time() - t0)
    for rid in sorted(results):
        logger.info("  #%d ok=%s %r", rid, results[rid]["ok"], results[rid]["text"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
