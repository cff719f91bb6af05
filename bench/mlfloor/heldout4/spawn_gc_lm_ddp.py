"""Continue pre-training a small GPT-2 on the support-ticket corpus, one process per CPU socket.

We launch the workers ourselves with torch.multiprocessing.spawn (the cluster image has no
torchrun wrapper) and rendezvous through a file in a scratch folder. Gradient checkpointing is on
because the real run uses a 1k context; find_unused_parameters is on because the LM head is tied
and we once had "parameters that were not used in producing loss" on an older DDP.

    python spawn_gc_lm_ddp.py --world-size 2 --steps 4 --out runs/lm
"""
import argparse
import json
import logging
import math
import os
import random
import shutil
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
from transformers import GPT2Config, GPT2LMHeadModel

log = logging.getLogger("lm-pretrain")

MODEL = dict(n_layer=2, n_embd=48, n_head=4, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
             attn_pdrop=0.0)
TRAIN = {
    "lr": 3e-4,
    "weight_decay": 0.01,
    "warmup": 2,
    "grad_clip": 1.0,
    "gradient_checkpointing": True,
    # copied from the HF forum thread that silenced the use_reentrant warning
    "gc_kwargs": {"use_reentrant": True},
    "find_unused_parameters": True,
}

TICKETS = [
    "my order arrived late and the box was damaged",
    "i cannot log in after resetting my password",
    "please cancel my subscription before the next billing date",
    "the app crashes when i open the settings page",
    "how do i change the delivery address on my order",
    "i was charged twice for the same invoice",
    "the discount code is not accepted at checkout",
    "can i return an item after thirty days",
    "my account was locked after too many attempts",
    "the tracking number does not show any updates",
    "i want to upgrade my plan to the business tier",
    "the invoice shows the wrong company name",
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--out", default="runs/lm")
    return p.parse_args()


def build_vocab(lines):
    words = sorted({w for line in lines for w in line.split()})
    vocab = {"<|endoftext|>": 0, "<unk>": 1}
    for w in words:
        vocab[w] = len(vocab)
    return vocab


def make_blocks(lines, vocab, block_size):
    ids = []
    for line in lines:
        ids.extend(vocab.get(w, 1) for w in line.split())
        ids.append(0)
    n = len(ids) // block_size
    return torch.tensor(ids[: n * block_size], dtype=torch.long).view(n, block_size)


def lr_lambda(warmup, total):
    def f(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
    return f


def setup(rank, world_size, init_file):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size)
    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s [rank{rank}] %(levelname)s %(message)s")


def worker(rank, world_size, args, init_file, vocab):
    setup(rank, world_size, init_file)
    torch.manual_seed(args.seed)
    random.seed(args.seed + rank)

    blocks = make_blocks(TICKETS * 4, vocab, args.block_size)
    sampler = DistributedSampler(TensorDataset(blocks), num_replicas=world_size, rank=rank,
                                 shuffle=True, seed=args.seed)
    loader = DataLoader(TensorDataset(blocks), batch_size=args.batch_size, sampler=sampler,
                        drop_last=True)
    log.info("%d blocks of %d tokens, %d per rank", len(blocks), args.block_size, len(sampler))

    config = GPT2Config(vocab_size=len(vocab), bos_token_id=0, eos_token_id=0, **MODEL)
    model = GPT2LMHeadModel(config)
    if TRAIN["gradient_checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=TRAIN["gc_kwargs"])
    model.train()
    ddp = DDP(model, find_unused_parameters=TRAIN["find_unused_parameters"])

    decay = [p for n, p in ddp.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in ddp.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": TRAIN["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}], lr=TRAIN["lr"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(TRAIN["warmup"], args.steps))

    step, t0 = 0, time.time()
    while step < args.steps:
        sampler.set_epoch(step)
        for (batch,) in loader:
            out = ddp(input_ids=batch, labels=batch)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(ddp.parameters(), TRAIN["grad_clip"])
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if rank == 0:
                log.info("step %d loss %.4f lr %.2e", step, out.loss.item(), sched.get_last_lr()[0])
            if step >= args.steps:
                break

    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        model.save_pretrained(args.out)
        with open(os.path.join(args.out, "vocab.json"), "w") as f:
            json.dump(vocab, f)
        log.info("saved to %s after %.1fs", args.out, time.time() - t0)
    dist.barrier()
    dist.destroy_process_group()


def main():
    args = parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    vocab = build_vocab(TICKETS)
    scratch = tempfile.mkdtemp(prefix="lm-rdzv-")
    init_file = os.path.join(scratch, "rendezvous")
    print(f"spawning {args.world_size} workers, vocab {len(vocab)}, rendezvous {init_file}")
    try:
        mp.spawn(worker, args=(args.world_size, args, init_file, vocab), nprocs=args.world_size,
                 join=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
