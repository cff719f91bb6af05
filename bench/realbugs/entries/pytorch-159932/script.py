"""Byte-level encoder for integer sensor counters.

Each sensor channel emits 64-bit counter readings. Instead of normalising the raw counts (which
span many orders of magnitude), every reading is split into its 8 bytes and each byte is looked up
in a 256-entry embedding, so the model sees the counter's bit pattern. Readings arrive as
(batch, channels, time) and are laid out time-major before the byte split. The site we deploy to
first has a single sensor per machine, hence `channels: 1` in the config below.
"""
import argparse
import logging
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

CONFIG = {
    "channels": 1,
    "time_steps": 8,
    "num_classes": 3,
    "embed_dim": 16,
    "hidden": 32,
    "batch_size": 4,
    "samples": 24,
    "epochs": 2,
    "lr": 1e-2,
}

log = logging.getLogger("counter-bytes")


def parse_args():
    ap = argparse.ArgumentParser(description="train a byte-level counter classifier")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--epochs", type=int, default=CONFIG["epochs"])
    ap.add_argument("--log-every", type=int, default=2)
    return ap.parse_args()


def make_readings(rng, n, channels, steps, num_classes):
    """Monotone counters; the class decides how fast the counter grows."""
    readings, labels = [], []
    for _ in range(n):
        label = rng.randrange(num_classes)
        rows = []
        for _ in range(channels):
            start = rng.randrange(1_000, 50_000)
            rate = (label + 1) * rng.randrange(200, 400)
            rows.append([start + rate * t for t in range(steps)])
        readings.append(rows)
        labels.append(label)
    return torch.tensor(readings, dtype=torch.int64), torch.tensor(labels)


def time_major(readings):
    # (batch, channels, time) -> (batch, time, channels), laid out densely for the byte split
    return torch.transpose(readings, 1, 2).contiguous()


def to_byte_tokens(sample):
    """(time, channels) int64 -> (time, channels * 8) byte ids in [0, 255]."""
    as_bytes = sample.view(dtype=torch.int8)
    return as_bytes.to(torch.long) + 128


class CounterDataset(Dataset):
    def __init__(self, readings, labels):
        self.readings = time_major(readings)
        self.labels = labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return to_byte_tokens(self.readings[idx]), self.labels[idx]


class ByteCounterClassifier(nn.Module):
    def __init__(self, channels, embed_dim, hidden, num_classes):
        super().__init__()
        self.embed = nn.Embedding(256, embed_dim)
        self.proj = nn.Linear(channels * 8 * embed_dim, hidden)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, tokens):
        b, t, k = tokens.shape
        x = self.embed(tokens).reshape(b, t, k * self.embed.embedding_dim)
        x = torch.relu(self.proj(x)).mean(dim=1)
        return self.head(x)


def train(model, loader, epochs, lr, log_every):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    for epoch in range(epochs):
        for tokens, labels in loader:
            loss = loss_fn(model(tokens), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % log_every == 0:
                log.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
    return model


@torch.no_grad()
def accuracy(model, loader):
    hits = total = 0
    for tokens, labels in loader:
        hits += (model(tokens).argmax(-1) == labels).sum().item()
        total += labels.numel()
    return hits / max(total, 1)


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    cfg = CONFIG
    readings, labels = make_readings(rng, cfg["samples"], cfg["channels"], cfg["time_steps"], cfg["num_classes"])
    log.info("readings %s, %d classes", tuple(readings.shape), cfg["num_classes"])
    data = CounterDataset(readings, labels)
    loader = DataLoader(data, batch_size=cfg["batch_size"], shuffle=True,
                        generator=torch.Generator().manual_seed(args.seed))
    model = ByteCounterClassifier(cfg["channels"], cfg["embed_dim"], cfg["hidden"], cfg["num_classes"])
    train(model, loader, args.epochs, cfg["lr"], args.log_every)
    eval_loader = DataLoader(data, batch_size=cfg["batch_size"])
    log.info("train accuracy %.3f", accuracy(model, eval_loader))


if __name__ == "__main__":
    main()
