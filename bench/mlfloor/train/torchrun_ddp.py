"""2-rank DDP pretraining of a tiny GPT-2 on CPU (gloo).

    torchrun --nproc_per_node 2 torchrun_ddp.py

Each rank reads its own shard of the corpus, builds the word vocabulary from what it reads,
sizes the model's embedding to that vocabulary and trains with DistributedDataParallel.
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import time
from dataclasses import dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import GPT2Config, GPT2LMHeadModel

log = logging.getLogger("ddp")

CORPUS = [
    "the cat sat on the mat",
    "a dog ran over the log",
    "the bird flew over the tree",
    "a cat and a dog sat under the tree",
    "the quick fox jumped over the lazy dog",
    "birds sing in the early morning light",
    "the mat was red and the log was wet",
    "rain fell softly on the quiet town",
]
SPECIALS = ["<pad>", "<unk>", "<eos>"]


@dataclass
class Config:
    n_layer: int = 2
    n_embd: int = 32
    n_head: int = 2
    seq_len: int = 12
    batch_size: int = 2
    steps: int = 3
    lr: float = 3e-4
    seed: int = 42
    backend: str = "gloo"


def parse_args() -> Config:
    p = argparse.ArgumentParser()
    for name, value in Config().__dict__.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    return Config(**vars(p.parse_args()))


def setup_distributed(backend):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group(backend, rank=int(os.environ.get("RANK", 0)),
                            world_size=int(os.environ.get("WORLD_SIZE", 1)))
    return dist.get_rank(), dist.get_world_size()


def shard_lines(lines, rank, world):
    return lines[rank::world]


def build_vocab(lines):
    words = sorted({w for line in lines for w in line.split()})
    return {w: i for i, w in enumerate(SPECIALS + words)}


def encode(lines, vocab, seq_len):
    ids = []
    for line in lines:
        ids.extend(vocab.get(w, vocab["<unk>"]) for w in line.split())
        ids.append(vocab["<eos>"])
    while len(ids) < seq_len + 1:
        ids = ids + ids
    return torch.tensor(ids)


def sample_batch(stream, batch_size, seq_len, rng):
    starts = [rng.randrange(0, len(stream) - seq_len) for _ in range(batch_size)]
    return torch.stack([stream[s:s + seq_len] for s in starts])


def build_model(cfg: Config, vocab_size: int) -> GPT2LMHeadModel:
    conf = GPT2Config(n_layer=cfg.n_layer, n_embd=cfg.n_embd, n_head=cfg.n_head,
                      vocab_size=vocab_size, n_positions=64,
                      bos_token_id=2, eos_token_id=2, pad_token_id=0)
    return GPT2LMHeadModel(conf)


def train(cfg: Config) -> None:
    rank, world = setup_distributed(cfg.backend)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [rank{rank}] %(message)s")
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed + rank)
    lines = shard_lines(CORPUS, rank, world)
    vocab = build_vocab(lines)
    log.info("%d lines, vocab of %d words", len(lines), len(vocab))
    stream = encode(lines, vocab, cfg.seq_len)
    model = DDP(build_model(cfg, len(vocab)))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    model.train()
    for step in range(cfg.steps):
        t0 = time.time()
        batch = sample_batch(stream, cfg.batch_size, cfg.seq_len, rng)
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            log.info("step %d loss %.4f (%.2fs)", step, loss.item(), time.time() - t0)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    train(parse_args())
