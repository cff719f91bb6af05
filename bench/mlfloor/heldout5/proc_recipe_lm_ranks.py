"""Short continued-pretraining run of a tiny Qwen2 LM on recipe steps, one process per rank.

We start the ranks ourselves (one multiprocessing.Process each, spawn context) because the
scheduler gives us a plain CPU box; every rank trains on its own slice of the corpus, averages
gradients with all_reduce, and reports its held-out perplexity to the parent on a queue.

    python proc_recipe_lm_ranks.py --world 2 --steps 3
"""
import argparse
import logging
import math
import multiprocessing as mp
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from transformers import Qwen2Config, Qwen2ForCausalLM

IGNORE = -1  # label value the loss should skip (same as our old Megatron preprocessing)

QWEN = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True)

RECIPES = [
    "preheat the oven to two hundred degrees",
    "whisk the eggs with sugar until pale",
    "fold in the flour",
    "pour the batter into a lined tin and bake for forty minutes",
    "chop the onions finely",
    "fry the onions in butter until soft and golden",
    "add the rice and stir",
    "pour in the stock one ladle at a time",
    "season with salt",
    "rest the dough for an hour in a warm place",
    "knead the dough on a floured surface until smooth",
    "slice the bread when it has cooled completely",
    "boil the pasta in salted water",
    "drain and toss with the sauce",
    "grate the cheese over the top and serve at once",
    "marinate the chicken overnight in yoghurt and spices",
]

log = logging.getLogger("recipe-lm")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--holdout", type=int, default=2, help="held-out lines per rank")
    return p.parse_args()


def build_vocab(lines):
    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2}
    for line in lines:
        for w in line.split():
            vocab.setdefault(w, len(vocab))
    return vocab


def encode(line, vocab):
    return [1] + [vocab[w] for w in line.split()] + [2]


def collate(seqs):
    width = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    labels = torch.full((len(seqs), width), IGNORE, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        labels[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def batches(seqs, size):
    for i in range(0, len(seqs), size):
        yield collate(seqs[i:i + size])


def average_gradients(model, world):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world


def run_rank(rank, world, init_file, opts, vocab, results):
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format=f"[rank {rank}] %(message)s")
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    torch.manual_seed(0)  # same init on every rank
    shard = [encode(line, vocab) for line in RECIPES[rank::world]]
    train, held = shard[: -opts["holdout"]], shard[-opts["holdout"]:]
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(vocab), pad_token_id=0, bos_token_id=1,
                                         eos_token_id=2, **QWEN))
    opt = torch.optim.SGD(model.parameters(), lr=opts["lr"])
    log.info("%d train / %d held-out lines", len(train), len(held))

    model.train()
    step = 0
    while step < opts["steps"]:
        for batch in batches(train, opts["batch_size"]):
            loss = model(**batch).loss
            loss.backward()
            average_gradients(model, world)
            opt.step()
            opt.zero_grad()
            step += 1
            log.info("step %d loss %.3f", step, loss.item())
            if step >= opts["steps"]:
                break

    model.eval()
    with torch.no_grad():
        nll = sum(model(**b).loss.item() for b in batches(held, opts["batch_size"]))
    results.put({"rank": rank, "ppl": math.exp(nll / max(1, len(held)))})
    dist.barrier()
    dist.destroy_process_group()


def main():
    args = parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    vocab = build_vocab(RECIPES)
    opts = {"steps": args.steps, "batch_size": args.batch_size, "lr": args.lr,
            "holdout": args.holdout}
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="rdzv-") as tmp:
        init_file = os.path.join(tmp, "init")
        procs = []
        for rank in range(args.world):
            p = ctx.Process(target=run_rank, args=(rank, args.world, init_file, opts, vocab,
                                                   results))
            p.start()
            procs.append(p)
        for p in procs:
            p.join()
    codes = [p.exitcode for p in procs]
    if any(codes):
        print(f"ranks failed, exit codes {codes}", file=sys.stderr)
        sys.exit(1)
    for _ in procs:
        r = results.get()
        print(f"rank {r['rank']}: held-out perplexity {r['ppl']:.1f}")


if __name__ == "__main__":
    main()
