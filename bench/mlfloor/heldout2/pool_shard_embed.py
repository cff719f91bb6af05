"""Embed a sharded text corpus with a small GPT-2 style encoder, one spawn worker per shard.

Each worker rebuilds the encoder from the shared architecture dict (same seed -> same weights),
turns its shard into id arrays with the shared vocabulary, mean-pools the last hidden state and
writes <out_dir>/shard_XX.npy. The parent collects per-shard stats.

    python pool_shard_embed.py --out-dir /tmp/embed_out --workers 2
"""
import argparse
import concurrent.futures as cf
import hashlib
import multiprocessing as mp
import os
import tempfile
import time

import numpy as np
import torch
from transformers import AutoConfig, AutoModel

ARCH = {
    "model_type": "gpt2",
    "vocab_size": 96,
    "n_positions": 64,
    "n_embd": 32,
    "n_layer": 2,
    "n_head": 2,
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "attn_pdrop": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 1,
}
PAD_ID = 0
UNK_ID = 1

CORPUS = [
    "battery drains fast after the update",
    "screen flickers when brightness is low",
    "app logs me out every hour",
    "order arrived damaged at my door",
    "the shipment left the warehouse on monday",
    "invoice number seven was paid twice",
    "customer asked for a refund on the blue jacket",
    "the courier could not find the address",
    "please cancel my subscription",
    "where is my parcel",
    "the package was left at the wrong door",
    "charged twice for one order",
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", default=os.path.join(tempfile.gettempdir(), "embed_out_demo"))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--shard-size", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-len", type=int, default=16)
    return p.parse_args()


def word_id(word, vocab_size):
    # stable hashing vocabulary shared by all workers; 0/1 are reserved for pad/unk
    h = int(hashlib.md5(word.encode()).hexdigest(), 16)
    return 2 + h % (vocab_size - 2)


def encode_shard(texts, vocab_size, max_len):
    rows = [[word_id(w, vocab_size) for w in t.split()][:max_len] for t in texts]
    lengths = [len(r) for r in rows]
    if len(set(lengths)) == 1:
        # fast path: no padding needed
        ids = np.array(rows)
        mask = np.ones_like(ids)
    else:
        ids = np.zeros((len(rows), max(lengths)))
        mask = np.zeros((len(rows), max(lengths)), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = r
            mask[i, :len(r)] = 1
        ids[mask == 0] = PAD_ID
    return ids, mask


def build_encoder(arch, seed):
    cfg_kwargs = dict(arch)
    model_type = cfg_kwargs.pop("model_type")
    config = AutoConfig.for_model(model_type, **cfg_kwargs)
    torch.manual_seed(seed)
    return AutoModel.from_config(config).eval()


def embed_shard(job):
    torch.set_num_threads(1)
    shard_id, texts = job["shard_id"], job["texts"]
    model = build_encoder(job["arch"], job["seed"])
    ids, mask = encode_shard(texts, job["arch"]["vocab_size"], job["max_len"])
    input_ids = torch.from_numpy(ids)
    attention_mask = torch.from_numpy(mask)
    with torch.no_grad():
        hidden = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1)
    out_path = os.path.join(job["out_dir"], f"shard_{shard_id:02d}.npy")
    np.save(out_path, pooled.numpy())
    return {"shard": shard_id, "rows": len(texts), "path": out_path,
            "norm": float(pooled.norm(dim=-1).mean())}


def make_jobs(args):
    jobs = []
    for i in range(0, len(CORPUS), args.shard_size):
        jobs.append({"shard_id": i // args.shard_size, "texts": CORPUS[i:i + args.shard_size],
                     "arch": ARCH, "seed": args.seed, "max_len": args.max_len,
                     "out_dir": args.out_dir})
    return jobs


def main():
    args = parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    jobs = make_jobs(args)
    print(f"{len(jobs)} shards, {args.workers} workers -> {args.out_dir}")
    t0 = time.time()
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx) as pool:
        for res in pool.map(embed_shard, jobs):
            print(f"shard {res['shard']:02d}: {res['rows']} rows, mean norm {res['norm']:.3f}")
    print(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
