"""Train a small sensor-anomaly classifier with Accelerate, forced onto the CPU.

The training box has a GPU that another job is using, so the run is pinned to the CPU with
`Accelerator(cpu=True)`. Readings are synthetic: windows of three sensor channels, where an
anomalous window carries a spike. A small 1-D conv net built from a config dict classifies them.
"""
import argparse
import logging
import math
import os
import random

# keep plain tracebacks in the job logs (this accelerate installs rich's handler otherwise)
os.environ.setdefault("ACCELERATE_DISABLE_RICH", "1")

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from accelerate import Accelerator

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("sensor-anomaly")

MODEL_CONFIG = {"channels": 3, "hidden": 16, "num_layers": 2, "kernel_size": 3, "num_classes": 2, "dropout": 0.1}


def parse_args():
    ap = argparse.ArgumentParser(description="sensor anomaly classifier (CPU)")
    ap.add_argument("--windows", type=int, default=96)
    ap.add_argument("--window_len", type=int, default=32)
    ap.add_argument("--batch_size", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=7)
    return ap.parse_args()


class SensorNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        layers, width = [], cfg["channels"]
        for _ in range(cfg["num_layers"]):
            layers += [nn.Conv1d(width, cfg["hidden"], cfg["kernel_size"], padding=cfg["kernel_size"] // 2),
                       nn.ReLU(), nn.Dropout(cfg["dropout"])]
            width = cfg["hidden"]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(cfg["hidden"], cfg["num_classes"])

    def forward(self, x):
        return self.head(self.body(x).mean(dim=-1))


def make_windows(rng, n, length, channels):
    xs, ys = [], []
    for _ in range(n):
        phase = rng.random() * 2 * math.pi
        window = [[math.sin(phase + 0.3 * t + c) + 0.1 * rng.gauss(0, 1) for t in range(length)]
                  for c in range(channels)]
        anomalous = rng.random() < 0.4
        if anomalous:
            spot = rng.randrange(length)
            for c in range(channels):
                window[c][spot] += 4.0
        xs.append(window)
        ys.append(int(anomalous))
    return TensorDataset(torch.tensor(xs), torch.tensor(ys))


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(-1) == y).sum().item()
            total += y.numel()
    model.train()
    return correct / max(total, 1)


def main():
    args = parse_args()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    train_set = make_windows(rng, args.windows, args.window_len, MODEL_CONFIG["channels"])
    eval_set = make_windows(rng, args.windows // 4, args.window_len, MODEL_CONFIG["channels"])

    accelerator = Accelerator(cpu=True)
    log.info("device: %s, processes: %d", accelerator.device, accelerator.num_processes)

    model = SensorNet(MODEL_CONFIG)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    eval_loader = DataLoader(eval_set, batch_size=args.batch_size)
    loss_fn = nn.CrossEntropyLoss()

    model = accelerator.prepare(model)
    optimizer = accelerator.prepare(optimizer)
    train_loader, eval_loader = accelerator.prepare(train_loader, eval_loader)

    for epoch in range(args.epochs):
        running = 0.0
        for step, (x, y) in enumerate(train_loader):
            loss = loss_fn(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            running += loss.item()
        if accelerator.is_main_process:
            log.info("epoch %d: loss %.4f eval acc %.3f", epoch, running / (step + 1), evaluate(model, eval_loader))


if __name__ == "__main__":
    main()
