"""Train a small regressor on a stream of sensor readings with Accelerate.

The readings come from an IterableDataset that already groups them into batches (the real one
reads fixed-size blocks from a log file), so the DataLoader is built with batch_size=None and
hands each block through as it is. The stream here is generated in code: a noisy linear signal.
"""
import argparse
import math

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

SETTINGS = {
    "features": 6,
    "hidden": 16,
    "block_size": 8,
    "blocks_per_epoch": 12,
    "noise": 0.05,
}


class SensorBlocks(IterableDataset):
    """Yields (inputs, targets) blocks of `block_size` readings each."""

    def __init__(self, features, block_size, blocks, noise, seed=0):
        self.features = features
        self.block_size = block_size
        self.blocks = blocks
        self.noise = noise
        self.seed = seed
        self.epoch = 0
        g = torch.Generator().manual_seed(1234)
        self.true_w = torch.randn(features, 1, generator=g)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return self.blocks

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        for _ in range(self.blocks):
            x = torch.randn(self.block_size, self.features, generator=g)
            y = x @ self.true_w + self.noise * torch.randn(self.block_size, 1, generator=g)
            yield x, y


def build_model(features, hidden):
    return nn.Sequential(nn.Linear(features, hidden), nn.GELU(), nn.Linear(hidden, 1))


def parse_args():
    ap = argparse.ArgumentParser(description="regression on streamed sensor blocks")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log_every", type=int, default=4)
    return ap.parse_args()


def evaluate(model, dataset, accelerator):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for x, y in dataset:
            x, y = x.to(accelerator.device), y.to(accelerator.device)
            total += nn.functional.mse_loss(model(x), y, reduction="sum").item()
            count += y.numel()
    model.train()
    return total / max(count, 1)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    accelerator = Accelerator()
    dataset = SensorBlocks(SETTINGS["features"], SETTINGS["block_size"], SETTINGS["blocks_per_epoch"],
                           SETTINGS["noise"], seed=args.seed)
    # the dataset yields whole blocks already, so no further batching here
    loader = DataLoader(dataset, batch_size=None)
    model = build_model(SETTINGS["features"], SETTINGS["hidden"])
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    held_out = SensorBlocks(SETTINGS["features"], SETTINGS["block_size"], 3, SETTINGS["noise"], seed=99)
    for epoch in range(args.epochs):
        running = 0.0
        for step, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            running += loss.item()
            if (step + 1) % args.log_every == 0:
                accelerator.print(f"epoch {epoch} step {step + 1}: loss {running / args.log_every:.4f}")
                running = 0.0
        mse = evaluate(model, held_out, accelerator)
        accelerator.print(f"epoch {epoch}: held-out rmse {math.sqrt(mse):.4f}")

    accelerator.wait_for_everyone()
    unwrapped = accelerator.unwrap_model(model)
    accelerator.print("first layer norm", unwrapped[0].weight.norm().item())


if __name__ == "__main__":
    main()
