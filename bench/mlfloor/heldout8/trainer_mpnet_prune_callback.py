"""Headline topic classifier (MPNet) fine-tuned with the Trainer while a callback prunes it gradually.

The edge build needs a sparse model, so instead of pruning once at the end the weights are pruned a
little at a time during fine-tuning: every PRUNE['every'] optimizer steps the callback removes the
smallest-magnitude weights of each encoder Linear (a fixed share of the layer's original size), and
it adds the current sparsity to the Trainer's logs. At the end the masks are made permanent.

    python trainer_mpnet_prune_callback.py --max-steps 12
"""
import argparse
import logging
import random
import shutil
import tempfile

import torch
from torch import nn
from torch.nn.utils import prune
from transformers import (MPNetConfig, MPNetForSequenceClassification, Trainer, TrainerCallback,
                          TrainingArguments, set_seed)

log = logging.getLogger("headline-topics")

TOPICS = ["sport", "markets", "science"]

HEADLINES = {
    "sport": ["late goal seals the derby", "champion retires after final match", "coach sacked after losing run",
              "record crowd for cup final", "injury rules striker out of derby"],
    "markets": ["shares slide as rates rise", "oil price hits yearly high", "bank profits beat forecasts",
                "bond yields fall after report", "retail sales slow in spring"],
    "science": ["probe sends images of comet", "new species found in deep sea", "telescope spots distant galaxy",
                "study links sleep and memory", "vaccine trial shows strong results"],
}

MODEL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=40)

# share of each layer's ORIGINAL weights removed at every pruning event
PRUNE = {"every": 2, "share": 0.3, "targets": ("attention", "intermediate", "output")}


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--max-steps", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=5)
    return p.parse_args()


class HeadlineDataset(torch.utils.data.Dataset):
    def __init__(self, rows, vocab):
        self.rows = rows
        self.vocab = vocab

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        text, label = self.rows[i]
        ids = [self.vocab["<s>"]] + [self.vocab.get(w, self.vocab["<unk>"]) for w in text.split()] + [self.vocab["</s>"]]
        return {"input_ids": ids, "labels": label}


def collate(features):
    width = max(len(f["input_ids"]) for f in features)
    ids = torch.tensor([f["input_ids"] + [1] * (width - len(f["input_ids"])) for f in features])
    return {"input_ids": ids, "attention_mask": (ids != 1).long(),
            "labels": torch.tensor([f["labels"] for f in features])}


class GradualPruningCallback(TrainerCallback):
    def __init__(self, model, every, share, targets):
        self.every = every
        self.layers = {name: mod for name, mod in model.named_modules()
                       if isinstance(mod, nn.Linear) and name.startswith("mpnet.encoder")
                       and any(t in name for t in targets)}
        # fixed number of weights per event, from each layer's size before any pruning
        self.per_event = {name: int(share * mod.weight.numel()) for name, mod in self.layers.items()}
        self.events = 0

    def sparsity(self):
        zeros = sum(int((mod.weight == 0).sum()) for mod in self.layers.values())
        return zeros / sum(mod.weight.numel() for mod in self.layers.values())

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.every:
            return
        for name, mod in self.layers.items():
            prune.l1_unstructured(mod, name="weight", amount=self.per_event[name])
        self.events += 1

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is not None:
            logs["sparsity"] = round(self.sparsity(), 3)
            logs["prune_events"] = self.events

    def on_train_end(self, args, state, control, **kwargs):
        for mod in self.layers.values():
            if prune.is_pruned(mod):
                prune.remove(mod, "weight")


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    set_seed(args.seed)
    rows = [(h, TOPICS.index(t)) for t, hs in HEADLINES.items() for h in hs]
    random.Random(args.seed).shuffle(rows)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for text, _ in rows:
        for w in text.split():
            vocab.setdefault(w, len(vocab))
    train, dev = HeadlineDataset(rows[:12], vocab), HeadlineDataset(rows[12:], vocab)
    config = MPNetConfig(vocab_size=len(vocab), num_labels=len(TOPICS), pad_token_id=1, bos_token_id=0,
                         eos_token_id=2, **MODEL)
    model = MPNetForSequenceClassification(config)
    pruner = GradualPruningCallback(model, PRUNE["every"], PRUNE["share"], PRUNE["targets"])
    log.info("pruning %d layers every %d steps", len(pruner.layers), PRUNE["every"])
    out_dir = tempfile.mkdtemp(prefix="headline-prune-")
    try:
        targs = TrainingArguments(output_dir=out_dir, max_steps=args.max_steps, learning_rate=args.lr,
                                  per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=8,
                                  logging_steps=2, eval_strategy="no", save_strategy="no", report_to=[],
                                  use_cpu=True, seed=args.seed, dataloader_num_workers=0)
        trainer = Trainer(model=model, args=targs, train_dataset=train, eval_dataset=dev, data_collator=collate,
                          callbacks=[pruner])
        trainer.train()
        metrics = trainer.evaluate()
        log.info("dev loss %.4f, final sparsity %.3f", metrics["eval_loss"], pruner.sparsity())
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
