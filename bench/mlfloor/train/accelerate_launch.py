"""Token-weighted SFT step loop with 🤗 Accelerate.

    accelerate launch --cpu --num_processes 1 accelerate_launch.py --steps 3

The loss weights response tokens more than prompt tokens (WEIGHTS below); per-token losses come
from cross_entropy(reduction="none") so that the weights can be applied.
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import random

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset
from transformers import LlamaConfig, LlamaForCausalLM, get_linear_schedule_with_warmup

logger = logging.getLogger("sft")

WEIGHTS = {"prompt": 0.1, "response": 1.0}

MODEL_CONFIGS = {
    "llama-tiny": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, vocab_size=128,
                       max_position_embeddings=64),
}


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="llama-tiny", choices=list(MODEL_CONFIGS))
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=16)
    p.add_argument("--prompt-len", type=int, default=6)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def make_dataset(n, seq_len, prompt_len, vocab, seed):
    rng = random.Random(seed)
    ids = torch.tensor([[rng.randrange(3, vocab) for _ in range(seq_len)] for _ in range(n)])
    weights = torch.full((n, seq_len), WEIGHTS["response"])
    weights[:, :prompt_len] = WEIGHTS["prompt"]
    return TensorDataset(ids, weights)


def weighted_token_loss(logits, input_ids, weights):
    shift_logits = logits[:, :-1].reshape(-1, logits.size(-1))
    shift_labels = input_ids[:, 1:].reshape(-1)
    per_token = F.cross_entropy(shift_logits.float(), shift_labels, reduction="none")
    return per_token * weights[:, 1:].reshape(-1)


def main():
    args = parse_args()
    accelerator = Accelerator(gradient_accumulation_steps=args.grad_accum)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logger.info("process %d/%d on %s", accelerator.process_index,
                accelerator.num_processes, accelerator.device)
    set_seed(args.seed)

    config = LlamaConfig(**MODEL_CONFIGS[args.model])
    model = LlamaForCausalLM(config)
    data = make_dataset(args.steps * args.batch_size, args.seq_len, args.prompt_len,
                        config.vocab_size, args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, args.warmup, args.steps)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    model.train()
    for step, (input_ids, weights) in enumerate(loader):
        with accelerator.accumulate(model):
            logits = model(input_ids=input_ids).logits
            loss = weighted_token_loss(logits, input_ids, weights)
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        mean = accelerator.gather(loss.detach().mean()).mean().item()
        logger.info("step %d loss %.4f ppl %.1f lr %.2e", step, mean, math.exp(mean),
                    scheduler.get_last_lr()[0])
        if step + 1 >= args.steps:
            break
    accelerator.wait_for_everyone()
    logger.info("done")


if __name__ == "__main__":
    main()
