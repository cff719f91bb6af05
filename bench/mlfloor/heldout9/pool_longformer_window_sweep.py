"""Attention-window sweep for the contract-clause classifier (tiny Longformer, data built in code).

Each trial trains a small Longformer whose local attention window is a fraction of the document
length, on synthetic clauses (the label is decided by a keyword far from the start, so the window
matters), and reports dev accuracy. Trials run in a spawn process pool, one keyword set per job.

    python pool_longformer_window_sweep.py --max-len 32 --workers 2
"""
import argparse
import logging
import multiprocessing as mp
import random
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import torch

log = logging.getLogger("window-sweep")

BASE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=80, pad_token_id=0, num_labels=3)
# fraction of --max-len each trial uses as its local attention window
SWEEP = [{"name": "tenth", "window_frac": 0.1, "lr": 5e-3},
         {"name": "quarter", "window_frac": 0.25, "lr": 3e-3},
         {"name": "half", "window_frac": 0.5, "lr": 3e-3}]
FILLER = ("the parties agree that this agreement shall be governed by the laws of the state and "
          "any notice under it must be given in writing to the address stated above").split()
KEYWORDS = {0: "terminate", 1: "indemnify", 2: "renew"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, default=32)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--per-class", type=int, default=8)
    p.add_argument("--seed", type=int, default=5)
    return p.parse_args()


def make_clauses(per_class, max_len, seed):
    rng = random.Random(seed)
    rows = []
    for label, kw in KEYWORDS.items():
        for _ in range(per_class):
            words = rng.sample(FILLER, k=max_len - 4)
            words.insert(rng.randrange(max_len // 2, max_len - 4), kw)
            rows.append((" ".join(words), label))
    rng.shuffle(rows)
    return rows


def build_vocab(rows):
    vocab = {"<pad>": 0, "<unk>": 1, "<s>": 2}
    for text, _ in rows:
        for w in text.split():
            vocab.setdefault(w, len(vocab))
    return vocab


def to_tensors(rows, vocab, max_len):
    ids = []
    for text, _ in rows:
        row = [vocab["<s>"]] + [vocab.get(w, 1) for w in text.split()][:max_len - 1]
        ids.append(row + [0] * (max_len - len(row)))
    input_ids = torch.tensor(ids)
    return input_ids, (input_ids != 0).long(), torch.tensor([label for _, label in rows])


def run_trial(name, window, lr, steps, max_len, per_class, seed):
    """One sweep point, in a pool worker."""
    from transformers import LongformerConfig, LongformerForSequenceClassification

    torch.manual_seed(seed)
    t0 = time.perf_counter()
    rows = make_clauses(per_class, max_len, seed)
    vocab = build_vocab(rows)
    split = int(0.75 * len(rows))
    train, dev = to_tensors(rows[:split], vocab, max_len), to_tensors(rows[split:], vocab, max_len)
    config = LongformerConfig(vocab_size=len(vocab), attention_window=window, **BASE)
    model = LongformerForSequenceClassification(config)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        idx = torch.randint(0, train[0].size(0), (8,))
        out = model(input_ids=train[0][idx], attention_mask=train[1][idx], labels=train[2][idx])
        out.loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    with torch.no_grad():
        pred = model(input_ids=dev[0], attention_mask=dev[1]).logits.argmax(-1)
    acc = (pred == dev[2]).float().mean().item()
    return {"name": name, "window": window, "acc": acc, "loss": out.loss.item(),
            "seconds": time.perf_counter() - t0}


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(message)s")
    jobs = []
    for point in SWEEP:
        window = int(args.max_len * point["window_frac"])
        jobs.append(dict(name=point["name"], window=window, lr=point["lr"], steps=args.steps,
                         max_len=args.max_len, per_class=args.per_class, seed=args.seed))
        log.info("trial %-8s window=%d lr=%g", point["name"], window, point["lr"])

    results = []
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx) as pool:
        futures = {pool.submit(run_trial, **job): job["name"] for job in jobs}
        for fut in as_completed(futures):
            res = fut.result()
            results.append(res)
            log.info("done %-8s window=%2d acc=%.2f loss=%.3f (%.1fs)", res["name"], res["window"],
                     res["acc"], res["loss"], res["seconds"])

    best = max(results, key=lambda r: r["acc"])
    log.info("best window: %d (%s, acc %.2f)", best["window"], best["name"], best["acc"])
    for r in sorted(results, key=lambda r: r["window"]):
        print(f"{r['window']:>4}  {r['acc']:.2f}")


if __name__ == "__main__":
    main()
