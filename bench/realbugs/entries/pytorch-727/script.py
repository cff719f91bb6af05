"""Sensor-fault classifier for a small plant: train an MLP on readings, then rank the sensors by
input-gradient saliency for the report.

Each sample is a window of readings from a dozen sensors (flattened). Negative readings are
glitches, so the network clips them at the input and applies input dropout as a regulariser; both
are done in place to save memory on the edge box. After training, the saliency of each sensor is
the mean absolute gradient of the predicted class score with respect to the input.
Readings are simulated in code.
"""
import argparse
import logging
import math
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("fault-clf")

CONFIG = {
    "sensors": 12,
    "window": 4,
    "classes": ["ok", "bearing", "overheat"],
    "hidden": 32,
    "input_dropout": 0.1,
    "dropout": 0.2,
}


def parse_args():
    ap = argparse.ArgumentParser(description="sensor fault classifier")
    ap.add_argument("--samples", type=int, default=240)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch_size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--top_k", type=int, default=4)
    return ap.parse_args()


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def simulate(n, cfg, rng):
    """Readings with a fault signature: bearing faults shake sensors 0-3, overheating lifts 8-11."""
    xs, ys = [], []
    for _ in range(n):
        label = rng.randrange(len(cfg["classes"]))
        window = []
        for t in range(cfg["window"]):
            row = [rng.gauss(1.0, 0.3) for _ in range(cfg["sensors"])]
            if label == 1:
                for s in range(4):
                    row[s] += 1.5 * math.sin(3.0 * t + s)
            elif label == 2:
                for s in range(8, 12):
                    row[s] += 2.0
            if rng.random() < 0.1:
                row[rng.randrange(cfg["sensors"])] = -5.0   # a glitch
            window.extend(row)
        xs.append(window)
        ys.append(label)
    return torch.tensor(xs, dtype=torch.float32), torch.tensor(ys)


class FaultNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        width = cfg["sensors"] * cfg["window"]
        self.input_dropout = cfg["input_dropout"]
        self.fc1 = nn.Linear(width, cfg["hidden"])
        self.fc2 = nn.Linear(cfg["hidden"], cfg["hidden"])
        self.head = nn.Linear(cfg["hidden"], len(cfg["classes"]))
        self.dropout = nn.Dropout(cfg["dropout"])

    def forward(self, x):
        # clip glitches and drop inputs in place: the windows are large on the real box
        x = F.relu(x, inplace=True)
        x = F.dropout(x, p=self.input_dropout, training=self.training, inplace=True)
        h = self.dropout(torch.tanh(self.fc1(x)))
        h = torch.tanh(self.fc2(h))
        return self.head(h)


def train(model, xs, ys, args):
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xs))
        total = 0.0
        for i in range(0, len(xs), args.batch_size):
            idx = perm[i:i + args.batch_size]
            loss = F.cross_entropy(model(xs[idx].clone()), ys[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        log.info("epoch %d loss %.4f", epoch, total / len(xs))


def sensor_saliency(model, xs, cfg):
    """Mean |d score / d input| per sensor, over the window."""
    model.eval()
    inputs = xs.clone().requires_grad_(True)
    scores = model(inputs)
    picked = scores.gather(1, scores.argmax(dim=1, keepdim=True)).sum()
    picked.backward()
    grads = inputs.grad.abs().view(len(xs), cfg["window"], cfg["sensors"])
    return grads.mean(dim=(0, 1))


def main():
    args = parse_args()
    seed_everything(args.seed)
    rng = random.Random(args.seed)
    xs, ys = simulate(args.samples, CONFIG, rng)
    model = FaultNet(CONFIG)
    train(model, xs, ys, args)
    with torch.no_grad():
        acc = (model.eval()(xs.clone()).argmax(dim=1) == ys).float().mean().item()
    log.info("train accuracy %.3f", acc)
    saliency = sensor_saliency(model, xs[:64], CONFIG)
    ranked = saliency.argsort(descending=True)[: args.top_k].tolist()
    log.info("most influential sensors: %s", ranked)


if __name__ == "__main__":
    main()
