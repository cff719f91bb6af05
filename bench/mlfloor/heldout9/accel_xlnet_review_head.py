"""Head-only fine-tuning of a review sentiment model with Accelerate (tiny XLNet, word vocab in code).

The backbone stays frozen and only the classification head trains (the recipe the team uses for every
encoder: FREEZE lists the name fragments of the modules that stay trainable). Parameters are split into
decay / no-decay groups, everything goes through accelerator.prepare, and the loop logs every few steps.

    accelerate launch --cpu --num_processes 1 accel_xlnet_review_head.py --epochs 2
"""
import argparse
import logging
import random

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader
from transformers import XLNetConfig, XLNetForSequenceClassification, get_scheduler

log = logging.getLogger("review-head")

ENCODER = dict(d_model=32, n_layer=2, n_head=2, d_inner=64, mem_len=None, num_labels=2, pad_token_id=0)
FREEZE = {"trainable": ["classifier", "pooler"], "no_decay": ["bias", "layer_norm.weight"]}
TRAIN = {"lr": 5e-3, "weight_decay": 0.01, "warmup_steps": 2, "log_every": 2, "max_len": 16}
POSITIVE = ["great sound and the battery lasts all day", "fits perfectly and feels solid", "fast delivery works as described",
            "my kids love it", "best purchase this year", "easy to set up and quiet"]
NEGATIVE = ["stopped working after a week", "the strap broke on day two", "smells of plastic and feels cheap",
            "arrived scratched and late", "the app keeps crashing", "much smaller than the photos"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seed", type=int, default=21)
    return p.parse_args()


def build_rows(seed):
    rows = [(t, 1) for t in POSITIVE] + [(t, 0) for t in NEGATIVE]
    random.Random(seed).shuffle(rows)
    vocab = {"<pad>": 0, "<unk>": 1, "<cls>": 2, "<sep>": 3}
    for text, _ in rows:
        for w in text.split():
            vocab.setdefault(w, len(vocab))
    return rows, vocab


def make_collate(vocab, max_len):
    def collate(batch):
        ids, masks = [], []
        for text, _ in batch:
            # XLNet puts <sep> <cls> at the end and pads on the left
            row = ([vocab.get(w, 1) for w in text.split()] + [vocab["<sep>"], vocab["<cls>"]])[-max_len:]
            pad = max_len - len(row)
            ids.append([0] * pad + row)
            masks.append([0] * pad + [1] * len(row))
        return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(masks),
                "labels": torch.tensor([label for _, label in batch])}
    return collate


def freeze_backbone(model, trainable):
    for name, param in model.named_parameters():
        param.requires_grad = any(part in name for part in trainable)
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    n_all = sum(p.numel() for p in model.parameters())
    log.info("trainable parameters: %d / %d (%.1f%%)", n_train, n_all, 100.0 * n_train / n_all)


def param_groups(model, weight_decay, no_decay):
    decay, skip = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (skip if any(nd in name for nd in no_decay) else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": skip, "weight_decay": 0.0}]


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    accelerator = Accelerator()
    torch.manual_seed(args.seed)
    rows, vocab = build_rows(args.seed)
    loader = DataLoader(rows, batch_size=args.batch_size, shuffle=True,
                        collate_fn=make_collate(vocab, TRAIN["max_len"]))

    model = XLNetForSequenceClassification(XLNetConfig(vocab_size=len(vocab), **ENCODER))
    freeze_backbone(model, FREEZE["trainable"])
    optimizer = torch.optim.AdamW(param_groups(model, TRAIN["weight_decay"], FREEZE["no_decay"]), lr=TRAIN["lr"])
    total_steps = args.epochs * len(loader)
    scheduler = get_scheduler("linear", optimizer, num_warmup_steps=TRAIN["warmup_steps"],
                              num_training_steps=total_steps)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    model.train()
    step = 0
    for epoch in range(args.epochs):
        running = 0.0
        for batch in loader:
            outputs = model(**batch)
            loss = outputs.loss
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            running += loss.item()
            step += 1
            if step % TRAIN["log_every"] == 0:
                accelerator.print(f"epoch {epoch} step {step} loss {running / TRAIN['log_every']:.4f} "
                                  f"lr {scheduler.get_last_lr()[0]:.2e}")
                running = 0.0
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        log.info("done after %d steps", step)


if __name__ == "__main__":
    main()
