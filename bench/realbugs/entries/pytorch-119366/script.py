"""Short-horizon load forecasting for a small building: a GRU reads the last day of hourly
meter readings and predicts the next hour.

Training uses AdamW with ReduceLROnPlateau on the validation loss, so the learning rate drops
when the validation curve flattens; the epoch header logs the learning rate the epoch starts with.
Readings are simulated in code (daily cycle, weekly cycle, noise).
"""
import argparse
import logging
import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("load-forecast")

CONFIG = {
    "window": 24,
    "hidden": 16,
    "layers": 1,
    "weight_decay": 1e-4,
    "plateau": {"mode": "min", "factor": 0.5, "patience": 1},
}


def parse_args():
    ap = argparse.ArgumentParser(description="hourly load forecaster")
    ap.add_argument("--hours", type=int, default=24 * 21)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--val_fraction", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=11)
    return ap.parse_args()


def simulate_load(hours, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(hours)
    daily = 1.0 + 0.6 * np.sin(2 * math.pi * (t % 24) / 24 - math.pi / 2)
    weekly = np.where((t // 24) % 7 >= 5, 0.7, 1.0)
    return (daily * weekly + rng.normal(0, 0.05, hours)).astype(np.float32)


def make_windows(series, window):
    xs = np.stack([series[i:i + window] for i in range(len(series) - window)])
    ys = series[window:]
    return torch.from_numpy(xs).unsqueeze(-1), torch.from_numpy(ys).unsqueeze(-1)


class Forecaster(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gru = nn.GRU(1, cfg["hidden"], num_layers=cfg["layers"], batch_first=True)
        self.head = nn.Linear(cfg["hidden"], 1)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.head(out[:, -1])


def run_epoch(model, loader, loss_fn, optimizer=None):
    training = optimizer is not None
    model.train(training)
    total, count = 0.0, 0
    with torch.set_grad_enabled(training):
        for xb, yb in loader:
            loss = loss_fn(model(xb), yb)
            if training:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            total += loss.item() * len(xb)
            count += len(xb)
    return total / count


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    xs, ys = make_windows(simulate_load(args.hours, args.seed), CONFIG["window"])
    split = int(len(xs) * (1 - args.val_fraction))
    train_loader = DataLoader(TensorDataset(xs[:split], ys[:split]), batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(TensorDataset(xs[split:], ys[split:]), batch_size=args.batch_size)

    model = Forecaster(CONFIG)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=CONFIG["weight_decay"])
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, **CONFIG["plateau"])
    loss_fn = nn.MSELoss()

    best = float("inf")
    for epoch in range(args.epochs):
        log.info("epoch %d: lr %s", epoch, scheduler.get_last_lr())
        train_loss = run_epoch(model, train_loader, loss_fn, optimizer)
        val_loss = run_epoch(model, val_loader, loss_fn)
        scheduler.step(val_loss)
        best = min(best, val_loss)
        log.info("epoch %d: train %.4f val %.4f", epoch, train_loss, val_loss)
    log.info("best validation mse %.4f", best)


if __name__ == "__main__":
    main()
