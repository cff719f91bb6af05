"""Batch perplexity job: split an evaluation set into chunks and score them in a process pool.

Labels are padded to the longest sequence of each batch with LABEL_PAD (see CONFIG), the
attention mask hides the padding, and every worker returns its summed loss and token count.
"""
from __future__ import annotations

import logging
import math
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, asdict
import multiprocessing as mp

os.environ.setdefault("HF_HUB_OFFLINE", "1")

log = logging.getLogger("ppl-pool")

CONFIG = {
    "model": {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 96, "n_positions": 64},
    "data": {"n_examples": 12, "min_len": 5, "max_len": 14, "seed": 7},
    "eval": {"chunks": 2, "workers": 1, "batch_size": 4, "pad_id": 0, "label_pad": -1},
}


@dataclass
class ChunkResult:
    chunk: int
    loss_sum: float
    tokens: int
    seconds: float


def make_examples(n_examples, min_len, max_len, seed, vocab_size):
    rng = random.Random(seed)
    return [
        [rng.randrange(1, vocab_size) for _ in range(rng.randint(min_len, max_len))]
        for _ in range(n_examples)
    ]


def split_chunks(items, n):
    size = math.ceil(len(items) / n)
    return [items[i:i + size] for i in range(0, len(items), size)]


def pad_batch(seqs, pad_id, label_pad):
    import torch

    longest = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), longest), pad_id, dtype=torch.long)
    labels = torch.full((len(seqs), longest), label_pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), longest), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, :len(seq)] = torch.tensor(seq)
        labels[row, :len(seq)] = torch.tensor(seq)
        mask[row, :len(seq)] = 1
    return ids, labels, mask


_MODEL = None


def _get_model(model_cfg):
    global _MODEL
    if _MODEL is None:
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        _MODEL = GPT2LMHeadModel(GPT2Config(**model_cfg)).eval()
    return _MODEL


def score_chunk(chunk_id, seqs, model_cfg, eval_cfg):
    import torch

    logging.basicConfig(level=logging.INFO, format="%(asctime)s [worker] %(message)s")
    model = _get_model(model_cfg)
    t0 = time.time()
    loss_sum, tokens = 0.0, 0
    bs = eval_cfg["batch_size"]
    with torch.no_grad():
        for i in range(0, len(seqs), bs):
            ids, labels, mask = pad_batch(seqs[i:i + bs], eval_cfg["pad_id"], eval_cfg["label_pad"])
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
            n = int(mask[:, 1:].sum())
            loss_sum += out.loss.item() * n
            tokens += n
    return ChunkResult(chunk_id, loss_sum, tokens, time.time() - t0)


def run(config) -> dict:
    m, d, e = config["model"], config["data"], config["eval"]
    examples = make_examples(d["n_examples"], d["min_len"], d["max_len"], d["seed"], m["vocab_size"])
    chunks = split_chunks(examples, e["chunks"])
    log.info("%d examples in %d chunks, %d workers", len(examples), len(chunks), e["workers"])
    results = []
    with ProcessPoolExecutor(max_workers=e["workers"], mp_context=mp.get_context("spawn")) as pool:
        futures = {pool.submit(score_chunk, i, c, m, e): i for i, c in enumerate(chunks)}
        for fut in as_completed(futures):
            res = fut.result()
            log.info("chunk %d: %d tokens in %.2fs", res.chunk, res.tokens, res.seconds)
            results.append(res)
    loss = sum(r.loss_sum for r in results) / max(1, sum(r.tokens for r in results))
    return {"loss": loss, "ppl": math.exp(loss), "chunks": [asdict(r) for r in results]}


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [main] %(message)s")
    summary = run(CONFIG)
    log.info("perplexity %.2f (loss %.4f)", summary["ppl"], summary["loss"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
