"""Text classification with accelerate, adapted from the repository's NLP example: a bag-of-words
model on generated reviews, with optional experiment tracking (TensorBoard).

Reviews, labels and the vocabulary are generated in code.
"""
import argparse
import os
import random
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader
from accelerate import Accelerator
from accelerate.utils import set_seed

GOOD = ["great", "fun", "clever", "warm", "sharp"]
BAD = ["dull", "slow", "messy", "flat", "cold"]
NEUTRAL = ["the", "film", "story", "cast", "was", "very", "and", "quite"]


def make_reviews(n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.randint(0, 1)
        words = rng.sample(NEUTRAL, 4) + rng.sample(GOOD if label else BAD, 2)
        rng.shuffle(words)
        rows.append((" ".join(words), label))
    return rows


class BagOfWords(nn.Module):
    def __init__(self, vocab_size, dim=32, classes=2):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.out = nn.Linear(dim, classes)

    def forward(self, ids, offsets):
        return self.out(self.emb(ids, offsets))


def collate(vocab):
    def fn(batch):
        ids, offsets, labels, pos = [], [], [], 0
        for text, label in batch:
            toks = [vocab[w] for w in text.split()]
            offsets.append(pos)
            ids.extend(toks)
            pos += len(toks)
            labels.append(label)
        return torch.tensor(ids), torch.tensor(offsets), torch.tensor(labels)
    return fn


def parse_args():
    parser = argparse.ArgumentParser(description="Simple example of training script.")
    parser.add_argument("--mixed_precision", default="no", choices=["no", "fp16", "bf16"])
    parser.add_argument("--with_tracking", action=argparse.BooleanOptionalAction, default=True,
                        help="Whether to load in all available experiment trackers from the environment and use them for logging.")
    parser.add_argument("--report_to", default="tensorboard")
    parser.add_argument("--output_dir", default=None)
    parser.add_argument("--num_epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=5e-2)
    return parser.parse_args()


def training_function(args):
    args.output_dir = args.output_dir or tempfile.mkdtemp(prefix="bow-")
    accelerator = (
        Accelerator(log_with=args.report_to, logging_dir=args.output_dir) if args.with_tracking else Accelerator()
    )
    set_seed(42)
    vocab = {w: i for i, w in enumerate(GOOD + BAD + NEUTRAL)}
    train = DataLoader(make_reviews(96, 0), batch_size=16, shuffle=True, collate_fn=collate(vocab))
    evals = DataLoader(make_reviews(32, 1), batch_size=16, collate_fn=collate(vocab))
    model = BagOfWords(len(vocab))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model, optimizer, train, evals = accelerator.prepare(model, optimizer, train, evals)
    if args.with_tracking:
        accelerator.init_trackers(os.path.basename(__file__).split(".")[0], vars(args))
    for epoch in range(args.num_epochs):
        model.train()
        total = 0.0
        for ids, offsets, labels in train:
            loss = nn.functional.cross_entropy(model(ids, offsets), labels)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            total += loss.item()
        model.eval()
        correct = 0
        with torch.no_grad():
            for ids, offsets, labels in evals:
                correct += (model(ids, offsets).argmax(-1) == labels).sum().item()
        accelerator.print(f"epoch {epoch}: accuracy {correct / 32:.2f}")
        if args.with_tracking:
            accelerator.log({"accuracy": correct / 32, "train_loss": total}, step=epoch)
    if args.with_tracking:
        accelerator.end_training()


if __name__ == "__main__":
    training_function(parse_args())
