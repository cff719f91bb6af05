"""Score held-out token streams with a small causal LM, one spawned worker per shard.

Usage:
    python spawn_argparse.py --shards 1 --seq-len 48 --context 32

Every worker rebuilds the model from the same config dict (so nothing heavy is pickled), scores
its shard in windows and reports the mean loss through a queue.
"""
from __future__ import annotations

import argparse
import logging
import math
import multiprocessing as mp
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

log = logging.getLogger("score")

MODEL_PRESETS = {
    "gpt2-nano": dict(n_layer=2, n_embd=32, n_head=2),
    "gpt2-micro": dict(n_layer=3, n_embd=48, n_head=4),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="gpt2-nano", choices=sorted(MODEL_PRESETS))
    p.add_argument("--vocab-size", type=int, default=128)
    p.add_argument("--context", type=int, default=32, help="n_positions of the model")
    p.add_argument("--seq-len", type=int, default=48, help="window length used for scoring")
    p.add_argument("--stride", type=int, default=16)
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--tokens-per-shard", type=int, default=160)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--log-level", default="INFO")
    return p.parse_args(argv)


def setup_logging(level: str, prefix: str = "main") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format=f"%(asctime)s [{prefix}] %(levelname)s %(message)s",
    )


def build_model_config(preset: str, vocab_size: int, context: int) -> dict:
    cfg = dict(MODEL_PRESETS[preset])
    cfg.update(vocab_size=vocab_size, n_positions=context)
    return cfg


def synthetic_stream(shard: int, n_tokens: int, vocab_size: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed + shard)
    return torch.randint(1, vocab_size, (n_tokens,), generator=g)


def windows(stream, seq_len: int, stride: int):
    out = []
    for start in range(0, max(1, len(stream) - seq_len + 1), stride):
        chunk = stream[start:start + seq_len]
        if len(chunk) == seq_len:
            out.append(chunk)
    return out


def batched(items, size):
    for i in range(0, len(items), size):
        yield items[i:i + size]


def score_shard(shard, model_cfg, seq_len, stride, batch_size, n_tokens, seed, results, log_level):
    """Worker target: rebuild the model, score one shard, put (shard, mean loss) on the queue."""
    setup_logging(log_level, prefix=f"shard{shard}")
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(**model_cfg)).eval()
    stream = synthetic_stream(shard, n_tokens, model_cfg["vocab_size"], seed)
    wins = windows(stream, seq_len, stride)
    log.info("shard %d: %d windows of %d tokens", shard, len(wins), seq_len)
    losses = []
    t0 = time.time()
    with torch.no_grad():
        for batch in batched(wins, batch_size):
            input_ids = torch.stack(batch)
            out = model(input_ids=input_ids, labels=input_ids)
            losses.append(out.loss.item())
    mean = sum(losses) / max(1, len(losses))
    log.info("shard %d done in %.2fs: loss %.3f ppl %.1f", shard, time.time() - t0, mean, math.exp(mean))
    results.put((shard, mean))


def main(argv=None) -> int:
    args = parse_args(argv)
    setup_logging(args.log_level)
    model_cfg = build_model_config(args.preset, args.vocab_size, args.context)
    log.info("model config: %s", model_cfg)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = []
    for shard in range(args.shards):
        p = ctx.Process(
            target=score_shard,
            args=(shard, model_cfg, args.seq_len, args.stride, args.batch_size,
                  args.tokens_per_shard, args.seed, results, args.log_level),
            name=f"score-{shard}",
        )
        p.start()
        procs.append(p)
    for p in procs:
        p.join()
    failed = [p.name for p in procs if p.exitcode != 0]
    if failed:
        log.error("workers failed: %s", ", ".join(failed))
        return 1
    scores = dict(results.get() for _ in procs)
    overall = sum(scores.values()) / len(scores)
    log.info("overall loss %.3f over %d shards", overall, len(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
