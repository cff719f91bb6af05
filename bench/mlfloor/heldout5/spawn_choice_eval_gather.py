"""Zero-shot multiple-choice eval of a tiny GPT-NeoX checkpoint, sharded over CPU processes.

Each rank scores its slice of the questions (the LM loss of every answer choice, lowest wins) and
rank 0 gathers the per-question results to write the report. TORCH_DISTRIBUTED_DEBUG=DETAIL stays
on since we chased a hang in the gather last month.

    python spawn_choice_eval_gather.py
"""
import json
import logging
import os
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist
from torch.multiprocessing import start_processes
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

EVAL = {
    "world_size": 2,
    "backend": "gloo",
    "seed": 11,
    "report": "choice_eval.json",
    "arch": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, max_position_embeddings=64, rotary_pct=0.5),
}

QUESTIONS = [
    ("what colour is the sky", ["blue", "green"], 0),
    ("what do cows drink", ["milk", "water"], 1),
    ("how many legs has a spider", ["eight", "six"], 0),
    ("which is heavier a kilo of iron or a kilo of feathers", ["iron", "neither"], 1),
    ("what melts ice", ["heat", "salt water"], 0),
    ("what falls from clouds", ["rain", "stones"], 0),
    ("where do fish live", ["trees", "water"], 1),
    ("what do bees make", ["honey", "milk"], 0),
    ("what season follows winter", ["autumn", "spring"], 1),
]

log = logging.getLogger("choice-eval")


def pick_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_vocab():
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for q, choices, _ in QUESTIONS:
        for w in (q + " " + " ".join(choices)).split():
            vocab.setdefault(w, len(vocab))
    return vocab


def choice_loss(model, vocab, question, choice):
    q_ids = [vocab.get(w, 2) for w in question.split()]
    c_ids = [vocab.get(w, 2) for w in choice.split()] + [1]
    ids = torch.tensor([q_ids + c_ids])
    labels = ids.clone()
    labels[0, : len(q_ids)] = -100  # score the answer only
    return model(input_ids=ids, labels=labels).loss.item()


def score_shard(model, vocab, shard):
    hits = []
    for question, choices, gold in shard:
        losses = [choice_loss(model, vocab, question, c) for c in choices]
        hits.append(float(min(range(len(choices)), key=losses.__getitem__) == gold))
    return torch.tensor(hits)


def evaluate(rank, world_size, cfg, out_dir):
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format=f"%(asctime)s rank={rank} %(message)s")
    dist.init_process_group(cfg["backend"], init_method="env://", rank=rank,
                            world_size=world_size)
    torch.manual_seed(cfg["seed"])
    vocab = build_vocab()
    model = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=len(vocab), bos_token_id=1,
                                             eos_token_id=1, **cfg["arch"]))
    model.eval()

    shard = QUESTIONS[rank::world_size]
    t0 = time.time()
    with torch.no_grad():
        hits = score_shard(model, vocab, shard)
    log.info("scored %d questions in %.2fs, local acc %.2f", len(shard), time.time() - t0,
             hits.mean().item())

    gathered = [torch.zeros_like(hits) for _ in range(world_size)]
    dist.all_gather(gathered, hits)
    if rank == 0:
        allhits = torch.cat(gathered)
        report = {"n": len(allhits), "accuracy": allhits.mean().item(),
                  "per_rank": [g.tolist() for g in gathered]}
        with open(os.path.join(out_dir, cfg["report"]), "w") as f:
            json.dump(report, f, indent=2)
        log.info("accuracy %.3f over %d questions", report["accuracy"], report["n"])
    dist.barrier()
    dist.destroy_process_group()


def main():
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(pick_port())
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    world_size = EVAL["world_size"]
    with tempfile.TemporaryDirectory(prefix="choice-eval-") as out_dir:
        print(f"{len(QUESTIONS)} questions over {world_size} ranks, port {os.environ['MASTER_PORT']}")
        start_processes(evaluate, args=(world_size, EVAL, out_dir), nprocs=world_size,
                        start_method="spawn")
        with open(os.path.join(out_dir, EVAL["report"])) as f:
            print(f.read())


if __name__ == "__main__":
    main()
