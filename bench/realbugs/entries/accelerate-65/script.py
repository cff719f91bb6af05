"""House-price regression on tabular features, trained with Accelerate.

Each sample is a small typed record (a NamedTuple) rather than a bare tuple, so the fields of a
batch are named everywhere in the code (batch.features, batch.price, batch.listing_id). The data
are generated in code from a few hand-written rules; the model is a small MLP built from a
config dict. Accelerate handles device placement so the same script runs on a laptop CPU or a
GPU box.
"""
import argparse
import logging
import math
import random
from typing import NamedTuple

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from accelerate import Accelerator

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("prices")

CONFIG = {"n_features": 6, "hidden": [32, 16], "dropout": 0.1}
NEIGHBOURHOODS = {"centre": 1.6, "river": 1.3, "suburb": 1.0, "industrial": 0.7}


class Listing(NamedTuple):
    features: torch.Tensor
    price: torch.Tensor
    listing_id: torch.Tensor


def parse_args():
    ap = argparse.ArgumentParser(description="tabular price regression")
    ap.add_argument("--n_train", type=int, default=96)
    ap.add_argument("--n_valid", type=int, default=24)
    ap.add_argument("--batch_size", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--cpu", action="store_true", default=True)
    return ap.parse_args()


class ListingDataset(Dataset):
    def __init__(self, n, rng, offset=0):
        self.rows = []
        for i in range(n):
            hood = rng.choice(list(NEIGHBOURHOODS))
            area = rng.uniform(30, 160)
            rooms = rng.randint(1, 6)
            age = rng.uniform(0, 80)
            floor = rng.randint(0, 12)
            garden = float(rng.random() < 0.3)
            price = NEIGHBOURHOODS[hood] * (2.2 * area + 9 * rooms - 0.4 * age + 3 * garden) + rng.gauss(0, 8)
            feats = [area / 100, rooms / 5, age / 80, floor / 12, garden, NEIGHBOURHOODS[hood]]
            self.rows.append((feats, price / 100, offset + i))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, idx):
        feats, price, lid = self.rows[idx]
        return Listing(torch.tensor(feats), torch.tensor(price), torch.tensor(lid))


class PriceMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        layers, width = [], config["n_features"]
        for hidden in config["hidden"]:
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(config["dropout"])]
            width = hidden
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, features):
        return self.net(features).squeeze(-1)


def evaluate(model, loader):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in loader:
            pred = model(batch.features)
            total += nn.functional.mse_loss(pred, batch.price, reduction="sum").item()
            count += batch.price.numel()
    model.train()
    return math.sqrt(total / max(count, 1))


def main():
    args = parse_args()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    accelerator = Accelerator(cpu=args.cpu)
    train_ds = ListingDataset(args.n_train, rng)
    valid_ds = ListingDataset(args.n_valid, rng, offset=args.n_train)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True)
    valid_dl = DataLoader(valid_ds, batch_size=args.batch_size)
    model = PriceMLP(CONFIG)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model, optimizer, train_dl, valid_dl = accelerator.prepare(model, optimizer, train_dl, valid_dl)
    log.info("device %s, %d train / %d valid listings", accelerator.device, len(train_ds), len(valid_ds))

    for epoch in range(args.epochs):
        for step, batch in enumerate(train_dl):
            loss = nn.functional.mse_loss(model(batch.features), batch.price)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            if step % 2 == 0:
                log.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
        log.info("epoch %d valid rmse %.4f", epoch, evaluate(model, valid_dl))


if __name__ == "__main__":
    main()
