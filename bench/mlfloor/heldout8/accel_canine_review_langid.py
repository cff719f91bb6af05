"""Language ID for marketplace reviews: a character-level CANINE classifier trained with Accelerate.

CANINE reads Unicode code points, so there is no tokenizer to ship: the collate turns each review
into code points, pads, and builds the mask. The model, optimizer, loaders and scheduler all go
through accelerator.prepare(). The scheduler comes from TRAIN (the last sweep moved it from
'linear' to plateau-based decay).

    accelerate launch --cpu --num_processes 1 accel_canine_review_langid.py --epochs 3
"""
import argparse
import logging
import math
import random

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from transformers import CanineConfig, CanineForSequenceClassification, get_scheduler

log = logging.getLogger("review-langid")

LABELS = ["en", "de", "fr"]

ENCODER = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
               downsampling_rate=4, num_hash_functions=2, num_hash_buckets=97, local_transformer_stride=16,
               max_position_embeddings=256, upsampling_kernel_size=4)

TRAIN = {"lr": 2e-3, "weight_decay": 0.01, "lr_scheduler_type": "reduce_lr_on_plateau",
         "scheduler_kwargs": {"mode": "min", "factor": 0.5, "patience": 1}, "warmup_steps": 0,
         "grad_accum": 1, "max_grad_norm": 1.0}

REVIEWS = {
    "en": ["arrived quickly and works fine", "the strap broke after a week", "great value for the price",
           "colour is darker than the photo", "would buy again", "battery lasts two days"],
    "de": ["kam schnell an und funktioniert", "der riemen ist nach einer woche gerissen",
           "sehr gutes preis leistungs verhaeltnis", "farbe ist dunkler als auf dem foto",
           "wuerde ich wieder kaufen", "akku haelt zwei tage"],
    "fr": ["arrive vite et fonctionne bien", "la sangle a casse apres une semaine", "excellent rapport qualite prix",
           "la couleur est plus foncee que sur la photo", "je rachèterais", "la batterie tient deux jours"],
}


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-chars", type=int, default=64)
    p.add_argument("--eval-every", type=int, default=3)
    p.add_argument("--seed", type=int, default=17)
    return p.parse_args()


def split_rows(seed):
    rows = [(text, LABELS.index(lang)) for lang, texts in REVIEWS.items() for text in texts]
    random.Random(seed).shuffle(rows)
    cut = int(len(rows) * 0.75)
    return rows[:cut], rows[cut:]


def make_collate(max_chars):
    def collate(batch):
        texts, labels = zip(*batch)
        codes = [[ord(c) for c in t[:max_chars]] for t in texts]
        width = max(len(c) for c in codes)
        ids = torch.tensor([c + [0] * (width - len(c)) for c in codes])
        return {"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": torch.tensor(labels)}
    return collate


def evaluate(model, loader, accelerator):
    model.eval()
    correct = total = 0
    losses = []
    with torch.no_grad():
        for batch in loader:
            out = model(**batch)
            preds, refs = accelerator.gather_for_metrics((out.logits.argmax(-1), batch["labels"]))
            correct += (preds == refs).sum().item()
            total += refs.numel()
            losses.append(out.loss.item())
    model.train()
    return correct / max(total, 1), sum(losses) / max(len(losses), 1)


def main():
    args = parse_args()
    accelerator = Accelerator(gradient_accumulation_steps=TRAIN["grad_accum"])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    set_seed(args.seed)
    train_rows, eval_rows = split_rows(args.seed)
    collate = make_collate(args.max_chars)
    train_dl = DataLoader(train_rows, batch_size=args.batch_size, shuffle=True, collate_fn=collate)
    eval_dl = DataLoader(eval_rows, batch_size=args.batch_size, collate_fn=collate)
    config = CanineConfig(num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
                          label2id={l: i for i, l in enumerate(LABELS)}, **ENCODER)
    model = CanineForSequenceClassification(config)
    no_decay = ["bias", "LayerNorm.weight"]
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": TRAIN["weight_decay"]},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=TRAIN["lr"])
    steps_per_epoch = math.ceil(len(train_dl) / TRAIN["grad_accum"])
    lr_scheduler = get_scheduler(TRAIN["lr_scheduler_type"], optimizer=optimizer,
                                 num_warmup_steps=TRAIN["warmup_steps"],
                                 num_training_steps=args.epochs * steps_per_epoch,
                                 scheduler_specific_kwargs=TRAIN["scheduler_kwargs"])
    model, optimizer, train_dl, eval_dl, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dl, eval_dl, lr_scheduler)
    accelerator.print(f"{len(train_rows)} train / {len(eval_rows)} eval reviews, {steps_per_epoch} steps per epoch")
    global_step = 0
    for epoch in range(args.epochs):
        model.train()
        for batch in train_dl:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), TRAIN["max_grad_norm"])
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            global_step += 1
            if global_step % args.eval_every == 0:
                acc, eval_loss = evaluate(model, eval_dl, accelerator)
                log.info("step %d loss %.4f eval_loss %.4f acc %.3f lr %.2e", global_step, loss.item(),
                         eval_loss, acc, optimizer.param_groups[0]["lr"])
    acc, eval_loss = evaluate(model, eval_dl, accelerator)
    accelerator.print(f"final eval accuracy {acc:.3f} loss {eval_loss:.4f}")
    accelerator.end_training()


if __name__ == "__main__":
    main()
