"""Attention-backend bake-off for the tiny support LM.

The parent trains a small Llama on our canned support replies for a few steps and saves it; then
each benchmark job (one dict of settings per job) loads that checkpoint in a worker process with its
own attention backend and dtype, measures perplexity and tokens/s on the held-out replies, and the
parent prints a table.

    python pool_llama_attn_bench.py --workers 2 --steps 3
"""
import argparse
import concurrent.futures as cf
import logging
import math
import multiprocessing as mp
import os
import shutil
import tempfile
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

log = logging.getLogger("attn-bench")

ARCH = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6)

JOBS = [
    {"name": "eager-fp32", "attn_implementation": "eager", "dtype": "float32", "batch_size": 2},
    {"name": "sdpa-fp32", "attn_implementation": "sdpa", "dtype": "float32", "batch_size": 2},
    {"name": "sdpa-bf16", "attn_implementation": "sdpa", "dtype": "bfloat16", "batch_size": 4},
    # same as the GPU box; should be the fastest
    {"name": "fa2-bf16", "attn_implementation": "flash_attention_2", "dtype": "bfloat16",
     "batch_size": 4},
]

REPLIES = [
    "thanks for reaching out we have reset your password",
    "your order ships within two business days",
    "you can change the delivery address in your account settings",
    "we are sorry the item arrived damaged a replacement is on its way",
    "the invoice is attached to the confirmation email",
    "you can cancel the plan at any time from the billing page",
    "our support team is available from nine to five",
    "please restart the app and try again",
]


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=2, help="timed passes per job")
    return ap.parse_args()


def encode(texts, vocab):
    bos, eos = vocab["<s>"], vocab["</s>"]
    return [[bos] + [vocab[w] for w in t.split()] + [eos] for t in texts]


def pad_batch(seqs, pad_id):
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return ids, mask, labels


def train_and_save(out_dir, vocab, args):
    torch.manual_seed(args.seed)
    config = LlamaConfig(vocab_size=len(vocab), pad_token_id=vocab["<pad>"], bos_token_id=vocab["<s>"],
                         eos_token_id=vocab["</s>"], **ARCH)
    model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    ids, mask, labels = pad_batch(encode(REPLIES[:6], vocab), vocab["<pad>"])
    for step in range(args.steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        log.info("train step %d loss %.3f", step, loss.item())
    model.save_pretrained(out_dir)
    return config.vocab_size


def run_job(ckpt_dir, texts_ids, pad_id, name, attn_implementation, dtype, batch_size, repeats=2):
    torch.set_num_threads(1)
    model = LlamaForCausalLM.from_pretrained(ckpt_dir, attn_implementation=attn_implementation,
                                             dtype=getattr(torch, dtype))
    model.eval()
    nll, count, tokens, secs = 0.0, 0, 0, 0.0
    for _ in range(repeats):
        for i in range(0, len(texts_ids), batch_size):
            ids, mask, labels = pad_batch(texts_ids[i:i + batch_size], pad_id)
            t0 = time.perf_counter()
            with torch.no_grad():
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            secs += time.perf_counter() - t0
            n = int(mask.sum())
            nll += loss.float().item() * n
            count += n
            tokens += n
    return {"name": name, "ppl": math.exp(nll / count), "tok_per_s": tokens / secs,
            "pid": os.getpid()}


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for t in REPLIES:
        for w in t.split():
            vocab.setdefault(w, len(vocab))
    held_out = encode(REPLIES[6:], vocab)
    ckpt_dir = tempfile.mkdtemp(prefix="attn-bench-")
    try:
        train_and_save(ckpt_dir, vocab, args)
        log.info("checkpoint saved, %d jobs on %d workers", len(JOBS), args.workers)
        ctx = mp.get_context("spawn")
        with cf.ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx) as pool:
            futures = [pool.submit(run_job, ckpt_dir, held_out, vocab["<pad>"], repeats=args.repeats, **job)
                       for job in JOBS]
            results = [f.result() for f in futures]
        print(f"{'job':12} {'ppl':>8} {'tok/s':>10}")
        for r in results:
            print(f"{r['name']:12} {r['ppl']:8.2f} {r['tok_per_s']:10.1f}")
    finally:
        shutil.rmtree(ckpt_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
