"""Fit a small MLP that predicts house prices from tabular features.

The features come out of the preprocessing step as numpy arrays (standardised with numpy), and
the network is a plain torch MLP; data is generated here with a fixed seed in place of the CSV.
"""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

FEATURES = ["rooms", "area", "age", "distance_to_centre", "floor"]


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def make_table(rows, seed):
    """Synthetic stand-in for the listings CSV: features and a price per row."""
    rng = np.random.default_rng(seed)
    rooms = rng.integers(1, 7, rows)
    area = rooms * 18 + rng.normal(0, 10, rows)
    age = rng.integers(0, 80, rows)
    distance = rng.gamma(2.0, 3.0, rows)
    floor = rng.integers(0, 12, rows)
    price = 1500 * area - 800 * age - 3000 * distance + 2000 * floor + rng.normal(0, 5000, rows)
    table = np.stack([rooms, area, age, distance, floor], axis=1)
    return table, price


def standardise(table):
    mean, std = table.mean(axis=0), table.std(axis=0)
    return (table - mean) / np.where(std == 0, 1, std)


class Listings(Dataset):
    def __init__(self, features, targets):
        self.x = torch.from_numpy(features)
        self.y = torch.from_numpy(targets / 1e5)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class PriceModel(nn.Module):
    def __init__(self, n_features, hidden):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def evaluate(model, loader):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            total += nn.functional.mse_loss(model(x), y, reduction="sum").item()
            count += len(y)
    return math.sqrt(total / count)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    table, price = make_table(args.rows, args.seed)
    features = standardise(table)
    split = int(0.8 * len(features))
    train = DataLoader(Listings(features[:split], price[:split]), batch_size=args.batch_size, shuffle=True)
    valid = DataLoader(Listings(features[split:], price[split:]), batch_size=args.batch_size)

    model = PriceModel(len(FEATURES), args.hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        for x, y in train:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: train loss {loss.item():.4f}, valid rmse {evaluate(model, valid):.4f}")


if __name__ == "__main__":
    main()
