"""Fine-tune a tiny GPT-2 language model with accelerate on generated text, with a long process-group timeout.

The corpus is generated in code; the model is a GPT-2 built from a small config; the tokenizer is
a character-level mapping.
"""
import argparse
import math
import os
import tempfile
from datetime import timedelta

import torch
from torch.utils.data import DataLoader
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs, ProjectConfiguration, set_seed
from transformers import GPT2Config, GPT2LMHeadModel, get_linear_schedule_with_warmup

CHARS = "abcdefghijklmnopqrstuvwxyz .,"


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--output_dir", default=None)
    p.add_argument("--gradient_accumulation_steps", type=int, default=2)
    p.add_argument("--mixed_precision", default="no", choices=["no", "fp16", "bf16"])
    p.add_argument("--report_to", default=None)
    p.add_argument("--learning_rate", type=float, default=5e-4)
    p.add_argument("--train_batch_size", type=int, default=4)
    p.add_argument("--max_train_steps", type=int, default=6)
    p.add_argument("--seq_len", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def corpus(n):
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs", "far"]
    return [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)) + "." for i in range(n)]


def encode(text, seq_len):
    ids = [CHARS.index(c) for c in text if c in CHARS][:seq_len]
    return ids + [0] * (seq_len - len(ids))


def main():
    args = parse_args()
    output_dir = args.output_dir or tempfile.mkdtemp(prefix="gpt2-char-")
    accelerator_project_config = ProjectConfiguration(project_dir=output_dir, logging_dir=os.path.join(output_dir, "logs"))
    accelerator = Accelerator(
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        mixed_precision=args.mixed_precision,
        log_with=args.report_to,
        project_config=accelerator_project_config,
        kwargs_handler=[InitProcessGroupKwargs(timeout=timedelta(seconds=10 * 3600))],
    )
    set_seed(args.seed)

    config = GPT2Config(vocab_size=len(CHARS), n_positions=args.seq_len, n_embd=32, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(config)
    data = torch.tensor([encode(t, args.seq_len) for t in corpus(32)])
    loader = DataLoader(data, batch_size=args.train_batch_size, shuffle=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    scheduler = get_linear_schedule_with_warmup(optimizer, 2, args.max_train_steps)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    step = 0
    model.train()
    while step < args.max_train_steps:
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(input_ids=batch, labels=batch).loss
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                step += 1
                accelerator.print(f"step {step}: loss {loss.item():.3f} ppl {math.exp(loss.item()):.1f}")
            if step >= args.max_train_steps:
                break
    accelerator.save_state(os.path.join(output_dir, "final"))


if __name__ == "__main__":
    main()
