# reprobot corpus: ddp_torchrun_unused (issue 29 shape)
# Exercises: the same 2-rank DDP job on CPU, started by a launch line:
#   torchrun --nproc_per_node 2 --master_port 12355 ddp_torchrun_unused.py --epochs 1
#   (gloo; the script also defaults MASTER_ADDR/MASTER_PORT to a fixed 12355 so that it runs
#   without torchrun, as many training scripts do). A tiny BERT built from BertConfig whose pooler
#   output never reaches the loss: every rank raises DDP's "Expected to have finished reduction in
#   the prior iteration" in the second iteration and prints its own traceback; torchrun then
#   raises torch.distributed.elastic.multiprocessing.errors.ChildFailedError with a table.
#   Scaffolding: argparse, a config dataclass, logging, a synthetic dataset, a training loop with
#   an optimizer, a scheduler, metrics and checkpointing that never runs.
# Expected failure (a rank's): RuntimeError: Expected to have finished reduction in the prior
#   iteration before starting a new one. ... @ torch/nn/parallel/distributed.py:_pre_forward
#   < torch/nn/parallel/distributed.py:forward
from __future__ import annotations

import argparse
import logging
import math
import os
import random
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import BertConfig, BertModel

log = logging.getLogger("ddp-train")


@dataclass
class TrainConfig:
    world_size: int = 2
    epochs: int = 1
    steps_per_epoch: int = 4
    batch_size: int = 4
    seq_len: int = 8
    lr: float = 1e-3
    warmup_steps: int = 1
    seed: int = 0
    vocab_size: int = 64
    hidden_size: int = 16
    layers: int = 2
    heads: int = 2
    checkpoint_dir: str = "checkpoints"
    log_every: int = 1
    tags: list[str] = field(default_factory=lambda: ["ddp", "cpu"])


def parse_args() -> TrainConfig:
    p = argparse.ArgumentParser(description="toy DDP fine-tuning on CPU")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    return TrainConfig(epochs=a.epochs, lr=a.lr, seed=a.seed)


def setup() -> tuple[int, int]:
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "12355")
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    return rank, world_size


def cleanup() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def build_model(cfg: TrainConfig) -> BertModel:
    config = BertConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
                        num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
                        intermediate_size=cfg.hidden_size * 2, max_position_embeddings=32)
    return BertModel(config)


def make_batches(cfg: TrainConfig, rank: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(cfg.seed + rank)
    return [torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len), generator=g)
            for _ in range(cfg.steps_per_epoch)]


def lr_lambda(cfg: TrainConfig):
    def f(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        return 0.5 * (1 + math.cos(math.pi * step / (cfg.epochs * cfg.steps_per_epoch)))
    return f


def save_checkpoint(model: DDP, cfg: TrainConfig, epoch: int) -> None:
    os.makedirs(cfg.checkpoint_dir, exist_ok=True)
    torch.save(model.module.state_dict(), os.path.join(cfg.checkpoint_dir, f"epoch{epoch}.pt"))


def train(cfg: TrainConfig) -> None:
    rank, cfg.world_size = setup()
    logging.basicConfig(level=logging.INFO, format=f"[rank{rank}] %(levelname)s %(message)s")
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    model = DDP(build_model(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg))
    step, started = 0, time.time()
    for epoch in range(cfg.epochs):
        losses = []
        for batch in make_batches(cfg, rank):
            out = model(input_ids=batch)
            # Only the token states reach the loss: the pooler's weights get no gradient.
            loss = out.last_hidden_state.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            step += 1
            if step % cfg.log_every == 0:
                log.info("epoch %d step %d loss %.4f", epoch, step, losses[-1])
        if rank == 0:
            save_checkpoint(model, cfg, epoch)
    log.info("done in %.1fs", time.time() - started)
    cleanup()


def main() -> None:
    cfg = parse_args()
    log.info("rank %s of %s starting: %s", os.environ.get("RANK"), os.environ.get("WORLD_SIZE"), cfg.tags)
    train(cfg)


if __name__ == "__main__":
    main()
