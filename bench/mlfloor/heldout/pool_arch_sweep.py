"""Architecture sweep: evaluate masked-LM loss of several small encoder shapes over data shards.

Every (architecture, shard) pair is one job. Jobs run in a spawn-context process pool; each worker
builds its model from the plain config dict in ARCH_REGISTRY, seeds it and evaluates the shard.

    python pool_arch_sweep.py --archs tiny,narrow,wide --shards 2 --workers 2
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import multiprocessing as mp
import os
import time
from typing import Dict, List, Tuple

import torch

logger = logging.getLogger("arch_sweep")

VOCAB_SIZE = 64
MASK_ID = 3

ARCH_REGISTRY: Dict[str, dict] = {
    "tiny": {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1,
             "intermediate_size": 64},
    "narrow": {"hidden_size": 24, "num_attention_heads": 4, "num_hidden_layers": 2,
               "intermediate_size": 48},
    # 40 = 8 * 5: the "wide" variant keeps head_dim close to the tiny one
    "wide": {"hidden_size": 40, "num_attention_heads": 6, "num_hidden_layers": 1,
             "intermediate_size": 96},
}

COMMON = {"vocab_size": VOCAB_SIZE, "max_position_embeddings": 64, "type_vocab_size": 1,
          "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "pad_token_id": 0}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--archs", default="tiny,narrow,wide")
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--examples-per-shard", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=16)
    p.add_argument("--mask-prob", type=float, default=0.15)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--report", default=None, help="optional JSON file for the results")
    return p.parse_args()


def make_shard(index: int, n: int, seq_len: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + index)
    return torch.randint(4, VOCAB_SIZE, (n, seq_len), generator=g)


def mask_tokens(ids: torch.Tensor, prob: float, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    chosen = torch.rand(ids.shape, generator=g) < prob
    chosen[:, 0] = True  # at least one target per row
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    inputs = torch.where(chosen, torch.full_like(ids, MASK_ID), ids)
    return inputs, labels


def build_model(arch: dict, seed: int):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    config = BertConfig(**{**COMMON, **arch})
    return BertForMaskedLM(config).eval()


def evaluate_job(job: dict) -> dict:
    """Runs in a pool worker. `job` is a plain dict so it pickles cheaply."""
    torch.set_num_threads(1)
    t0 = time.time()
    model = build_model(job["arch"], job["seed"])
    ids = make_shard(job["shard"], job["n"], job["seq_len"], job["seed"])
    inputs, labels = mask_tokens(ids, job["mask_prob"], job["seed"] + job["shard"])
    with torch.no_grad():
        out = model(input_ids=inputs, attention_mask=torch.ones_like(inputs), labels=labels)
    loss = float(out.loss)
    return {"arch": job["name"], "shard": job["shard"], "loss": loss, "ppl": math.exp(loss),
            "params": sum(p.numel() for p in model.parameters()), "secs": time.time() - t0}


def make_jobs(args: argparse.Namespace) -> List[dict]:
    jobs = []
    for name in args.archs.split(","):
        if name not in ARCH_REGISTRY:
            raise SystemExit(f"unknown arch {name!r}; known: {sorted(ARCH_REGISTRY)}")
        for shard in range(args.shards):
            jobs.append({"name": name, "arch": ARCH_REGISTRY[name], "shard": shard,
                         "n": args.examples_per_shard, "seq_len": args.seq_len,
                         "mask_prob": args.mask_prob, "seed": args.seed})
    return jobs


def summarize(results: List[dict]) -> Dict[str, dict]:
    table: Dict[str, dict] = {}
    for r in results:
        row = table.setdefault(r["arch"], {"losses": [], "params": r["params"]})
        row["losses"].append(r["loss"])
    for name, row in table.items():
        row["mean_loss"] = sum(row["losses"]) / len(row["losses"])
    return table


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    jobs = make_jobs(args)
    logger.info("%d jobs over %d workers", len(jobs), args.workers)

    ctx = mp.get_context("spawn")
    with ctx.Pool(processes=args.workers) as pool:
        results = pool.map(evaluate_job, jobs, chunksize=1)

    table = summarize(results)
    for name, row in sorted(table.items(), key=lambda kv: kv[1]["mean_loss"]):
        logger.info("%-8s params=%7d mean_loss=%.4f", name, row["params"], row["mean_loss"])
    if args.report:
        with open(args.report, "w") as fh:
            json.dump(table, fh, indent=2)
        logger.info("report written to %s", args.report)


if __name__ == "__main__":
    main()
