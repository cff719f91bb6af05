"""Mixture-of-experts sweep: how many experts and how many per token for the tiny Mixtral LM.

Each grid point trains a small MixtralForCausalLM from scratch for a few steps on the canned
changelog lines and reports the held-out perplexity. Grid points run in a spawn process pool,
one dict of settings per job; the table at the end goes into the design doc.

    python pool_mixtral_moe_sweep.py --steps 4 --workers 2
"""
import argparse
import concurrent.futures as cf
import itertools
import logging
import math
import multiprocessing as mp
import os
import time

import torch
from transformers import MixtralConfig, MixtralForCausalLM

log = logging.getLogger("moe-sweep")

GRID = {"num_local_experts": [2, 4], "num_experts_per_tok": [2, 4]}
FIXED = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, router_aux_loss_coef=0.01,
             output_router_logits=True, sliding_window=None)

LINES = [
    "added support for scheduled exports",
    "fixed a crash when the config file is empty",
    "improved startup time on large projects",
    "the api now returns pagination links",
    "removed the legacy sync endpoint",
    "fixed wrong totals in the monthly report",
    "added a dark theme to the dashboard",
    "updated the search index format",
    "fixed timezone handling in reminders",
    "the cli now prints a progress bar",
]


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=9)
    return p.parse_args()


def make_jobs(args):
    keys = sorted(GRID)
    jobs = []
    for values in itertools.product(*(GRID[k] for k in keys)):
        job = dict(zip(keys, values))
        job.update(name="e{num_local_experts}-k{num_experts_per_tok}".format(**job), steps=args.steps,
                   lr=args.lr, seed=args.seed)
        jobs.append(job)
    return jobs


def tokenize(lines):
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for line in lines:
        for w in line.split():
            vocab.setdefault(w, len(vocab))
    rows = [[1] + [vocab[w] for w in line.split()] + [2] for line in lines]
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    return vocab, ids, (ids != 0).long()


def run_job(job):
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    torch.manual_seed(job["seed"])
    vocab, ids, mask = tokenize(LINES)
    labels = ids.masked_fill(mask == 0, -100)
    config = MixtralConfig(vocab_size=len(vocab), pad_token_id=0, bos_token_id=1, eos_token_id=2,
                           num_local_experts=job["num_local_experts"],
                           num_experts_per_tok=job["num_experts_per_tok"], **FIXED)
    model = MixtralForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=job["lr"])
    t0 = time.time()
    model.train()
    for _ in range(job["steps"]):
        out = model(input_ids=ids[:8], attention_mask=mask[:8], labels=labels[:8])
        out.loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    with torch.no_grad():
        held = model(input_ids=ids[8:], attention_mask=mask[8:], labels=labels[8:])
    return {"name": job["name"], "ppl": math.exp(held.loss.item()), "aux": float(held.aux_loss or 0.0),
            "params": sum(p.numel() for p in model.parameters()), "secs": time.time() - t0,
            "run": os.environ.get("SWEEP_RUN_ID", "?")}


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    # workers inherit these; keep each worker single-threaded so two fit on the laptop
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["SWEEP_RUN_ID"] = time.strftime("moe-%Y%m%d-%H%M%S")
    if torch.cuda.is_available():
        log.warning("CUDA is available but the sweep is CPU-only; set CUDA_VISIBLE_DEVICES='' to silence this")
    else:
        log.info("CPU only, %d workers", args.workers)
    jobs = make_jobs(args)
    log.info("%d grid points: %s", len(jobs), ", ".join(j["name"] for j in jobs))
    ctx = mp.get_context("spawn")
    rows = []
    with cf.ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx) as pool:
        for res in pool.map(run_job, jobs):
            log.info("%s done: ppl %.2f (%.1fs)", res["name"], res["ppl"], res["secs"])
            rows.append(res)
    print(f"run {os.environ['SWEEP_RUN_ID']}")
    print(f"{'config':10} {'params':>8} {'ppl':>8} {'aux':>6}")
    for r in sorted(rows, key=lambda r: r["ppl"]):
        print(f"{r['name']:10} {r['params']:8d} {r['ppl']:8.2f} {r['aux']:6.3f}")


if __name__ == "__main__":
    main()
