"""Churn prediction on account features with a hand-written PyTorch model, fine-tuned with LoRA.

The scorer is our own nn.Module (not a transformers model): an input projection, a few residual
MLP blocks and a two-way head, pretrained elsewhere. For each new region we only train LoRA
adapters on the block projections and let the transformers Trainer run the loop, logging to
TensorBoard. The account table is generated in code.
"""
import argparse
import logging
import random

import torch
from peft import LoraConfig, get_peft_model
from torch import nn
from transformers import Trainer, TrainingArguments

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("churn-lora")

FEATURES = ["tenure_months", "monthly_spend", "support_tickets", "logins_per_week", "discount", "late_payments"]


def parse_args():
    ap = argparse.ArgumentParser(description="LoRA fine-tuning of the churn scorer for one region")
    ap.add_argument("--n_accounts", type=int, default=96)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--max_steps", type=int, default=12)
    ap.add_argument("--batch_size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--output_dir", default="churn-lora-region")
    return ap.parse_args()


class Block(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, 2 * hidden)
        self.down = nn.Linear(2 * hidden, hidden)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


class ChurnScorer(nn.Module):
    def __init__(self, n_features, hidden, blocks):
        super().__init__()
        self.proj = nn.Linear(n_features, hidden)
        self.blocks = nn.ModuleList(Block(hidden) for _ in range(blocks))
        self.head = nn.Linear(hidden, 2)

    def forward(self, features, labels=None):
        h = self.proj(features)
        for block in self.blocks:
            h = block(h)
        logits = self.head(h)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


def make_accounts(rng, n):
    rows = []
    for _ in range(n):
        x = [rng.uniform(0, 60), rng.uniform(10, 120), rng.randint(0, 8), rng.uniform(0, 14),
             rng.choice([0.0, 0.1, 0.2]), rng.randint(0, 4)]
        risk = 0.04 * x[2] + 0.08 * x[5] - 0.01 * x[0] - 0.03 * x[3] + rng.gauss(0, 0.1)
        scaled = [x[0] / 60, x[1] / 120, x[2] / 8, x[3] / 14, x[4], x[5] / 4]
        rows.append({"features": scaled, "labels": int(risk > 0)})
    return rows


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    accounts = make_accounts(rng, args.n_accounts)
    cut = int(0.8 * len(accounts))
    log.info("%d accounts, churn rate %.2f", len(accounts), sum(a["labels"] for a in accounts) / len(accounts))

    model = ChurnScorer(len(FEATURES), args.hidden, args.blocks)
    lora_config = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.0,
                             target_modules=["up", "down"], modules_to_save=["head"])
    model = get_peft_model(model, lora_config)
    model.print_trainable_parameters()

    training_args = TrainingArguments(output_dir=args.output_dir, logging_dir=f"{args.output_dir}/tb",
                                      max_steps=args.max_steps, per_device_train_batch_size=args.batch_size,
                                      per_device_eval_batch_size=args.batch_size, learning_rate=args.lr,
                                      logging_steps=2, evaluation_strategy="steps", eval_steps=6,
                                      save_strategy="no", remove_unused_columns=False,
                                      report_to=["tensorboard"], seed=args.seed)
    trainer = Trainer(model=model, args=training_args, train_dataset=accounts[:cut], eval_dataset=accounts[cut:])
    trainer.train()
    log.info("eval: %s", trainer.evaluate())


if __name__ == "__main__":
    main()
