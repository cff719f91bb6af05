"""Fine-tune a small T5 to normalise product codes, then save it with Accelerate.

Inputs are messy product codes ("sku 12-ab 7"), targets their canonical form ("SKU-12AB-7").
Text is tokenised at the character level with a vocabulary built in code; a small T5 built from
a config is trained with a plain Accelerate loop on the CPU and saved at the end with
`accelerator.save_model`, so the export does not depend on how the model was wrapped.
"""
import argparse
import logging
import os
import random

# plain tracebacks in the job logs (this accelerate installs rich's handler otherwise)
os.environ.setdefault("ACCELERATE_DISABLE_RICH", "1")

import torch
from torch.utils.data import DataLoader
from transformers import T5Config, T5ForConditionalGeneration

from accelerate import Accelerator

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("sku-normaliser")

PAD, EOS, UNK = 0, 1, 2
ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789- "
VOCAB = {ch: i + 3 for i, ch in enumerate(ALPHABET)}


def parse_args():
    ap = argparse.ArgumentParser(description="product-code normaliser")
    ap.add_argument("--examples", type=int, default=64)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--save_directory", default="sku-normaliser-model")
    return ap.parse_args()


def make_pair(rng):
    prefix = rng.choice(["sku", "SKU", "Sku"])
    num = rng.randint(1, 99)
    letters = "".join(rng.choice("abcdef") for _ in range(2))
    tail = rng.randint(1, 9)
    messy = f"{prefix} {num}-{letters} {tail}" if rng.random() < 0.5 else f"{prefix}{num} {letters}-{tail}"
    return messy, f"SKU-{num}{letters.upper()}-{tail}"


def encode(text, length):
    ids = [VOCAB.get(ch, UNK) for ch in text][: length - 1] + [EOS]
    return ids + [PAD] * (length - len(ids))


def collate(pairs, src_len=16, tgt_len=12):
    src = torch.tensor([encode(s, src_len) for s, _ in pairs])
    labels = torch.tensor([encode(t, tgt_len) for _, t in pairs])
    labels[labels == PAD] = -100
    return {"input_ids": src, "attention_mask": (src != PAD).long(), "labels": labels}


def build_model():
    config = T5Config(vocab_size=len(VOCAB) + 3, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=4, pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD)
    return T5ForConditionalGeneration(config)


def main():
    args = parse_args()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    pairs = [make_pair(rng) for _ in range(args.examples)]

    accelerator = Accelerator()
    model = build_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loader = DataLoader(pairs, batch_size=args.batch_size, shuffle=True, collate_fn=collate)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    model.train()
    for epoch in range(args.epochs):
        total = 0.0
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            total += loss.item()
        log.info("epoch %d: mean loss %.4f", epoch, total / (step + 1))

    accelerator.wait_for_everyone()
    unwrapped = accelerator.unwrap_model(model)
    accelerator.save_model(model=unwrapped, save_directory=args.save_directory)
    log.info("saved to %s", args.save_directory)


if __name__ == "__main__":
    main()
