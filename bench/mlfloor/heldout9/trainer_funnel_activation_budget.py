"""Warranty-claim triage with the HF Trainer and an activation-memory guard (tiny Funnel Transformer).

The guard callback estimates the activation memory of one training step from the batch size, the
sequence length and the model's width and depth; when it is over the budget of the box the job runs
on, it switches activation checkpointing on before the first step, and it logs the estimate.

    python trainer_funnel_activation_budget.py --max-steps 8 --batch-size 8
"""
import argparse
import logging
import shutil
import tempfile

import torch
from torch.utils.data import Dataset
from transformers import (FunnelConfig, FunnelForSequenceClassification, Trainer, TrainerCallback,
                          TrainingArguments)

log = logging.getLogger("warranty-triage")

LABELS = ["approve", "inspect", "reject"]
MODEL = dict(d_model=32, n_head=2, d_head=16, d_inner=64, block_sizes=[1, 1], block_repeats=None,
             num_decoder_layers=1, max_position_embeddings=64, pad_token_id=0)
GUARD = {"budget_mb": 0.25, "bytes_per_value": 4, "values_per_layer": 16,
         "checkpoint_kwargs": {"use_reentrant": False}}
CLAIMS = [("screen cracked after a drop", 2), ("battery swells and the case bends", 0), ("fan noise when idle", 1),
          ("charger stopped working within a month", 0), ("water damage under the keyboard", 2),
          ("dead pixels in the corner", 1), ("hinge snapped while opening", 1), ("sticker removed and seal broken", 2),
          ("no power at all from day one", 0), ("speaker crackles at high volume", 1), ("coffee spilled on it", 2),
          ("trackpad clicks by itself", 0)]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-steps", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-len", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=2)
    return p.parse_args()


class ClaimDataset(Dataset):
    def __init__(self, rows, vocab, max_len):
        self.items = []
        for text, label in rows:
            ids = [1] + [vocab[w] for w in text.split()][:max_len - 1]
            self.items.append({"input_ids": ids, "labels": label})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def pad_collate(features):
    width = max(len(f["input_ids"]) for f in features)
    ids = [f["input_ids"] + [0] * (width - len(f["input_ids"])) for f in features]
    input_ids = torch.tensor(ids)
    return {"input_ids": input_ids, "attention_mask": (input_ids != 0).long(),
            "labels": torch.tensor([f["labels"] for f in features])}


class ActivationBudgetCallback(TrainerCallback):
    """Turns on activation checkpointing when one step's activations would not fit the budget."""

    def __init__(self, max_len, guard):
        self.max_len = max_len
        self.guard = guard
        self.estimate_mb = None

    def estimate(self, model, batch_size):
        cfg = model.config
        layers = sum(cfg.block_sizes) + cfg.num_decoder_layers
        values = batch_size * self.max_len * cfg.d_model * layers * self.guard["values_per_layer"]
        return values * self.guard["bytes_per_value"] / 2 ** 20

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.estimate_mb = self.estimate(model, args.per_device_train_batch_size)
        log.info("activation estimate %.2f MB, budget %.2f MB", self.estimate_mb, self.guard["budget_mb"])
        if self.estimate_mb > self.guard["budget_mb"]:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=self.guard["checkpoint_kwargs"])
            log.info("activation checkpointing on")

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is not None and self.estimate_mb is not None:
            logs["activation_mb"] = round(self.estimate_mb, 3)


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(args.seed)
    vocab = {"<pad>": 0, "<cls>": 1}
    for text, _ in CLAIMS:
        for w in text.split():
            vocab.setdefault(w, len(vocab))
    train_ds = ClaimDataset(CLAIMS[:9], vocab, args.max_len)
    eval_ds = ClaimDataset(CLAIMS[9:], vocab, args.max_len)
    model = FunnelForSequenceClassification(FunnelConfig(vocab_size=len(vocab), num_labels=len(LABELS), **MODEL))

    out_dir = tempfile.mkdtemp(prefix="warranty-triage-")
    try:
        training_args = TrainingArguments(
            output_dir=out_dir, max_steps=args.max_steps, per_device_train_batch_size=args.batch_size,
            per_device_eval_batch_size=args.batch_size, learning_rate=args.lr, logging_steps=2,
            eval_strategy="steps", eval_steps=4, save_strategy="no", report_to=[], use_cpu=True,
            seed=args.seed, disable_tqdm=True)
        trainer = Trainer(model=model, args=training_args, train_dataset=train_ds, eval_dataset=eval_ds,
                          data_collator=pad_collate,
                          callbacks=[ActivationBudgetCallback(args.max_len, GUARD)])
        result = trainer.train()
        log.info("train loss %.4f", result.training_loss)
        log.info("eval: %s", trainer.evaluate())
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
