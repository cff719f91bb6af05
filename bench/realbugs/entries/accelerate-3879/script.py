"""Train a small vision-transformer-style classifier with accelerate, compiling only its transformer
blocks (the stem and head stay eager), then unwrap the model to save its weights.

Patches and labels are generated in code; the model is built from a config dict.
"""
import argparse
import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from accelerate import Accelerator

CONFIG = {"patch": 4, "image": 16, "dim": 32, "heads": 4, "depth": 2, "classes": 5}


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        n = (cfg["image"] // cfg["patch"]) ** 2
        self.stem = nn.Conv2d(3, cfg["dim"], cfg["patch"], stride=cfg["patch"])
        self.pos = nn.Parameter(torch.zeros(1, n, cfg["dim"]))
        self.blocks = nn.ModuleList(Block(cfg["dim"], cfg["heads"]) for _ in range(cfg["depth"]))
        self.head = nn.Linear(cfg["dim"], cfg["classes"])

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(dim=1))


def compile_blocks(model, backend):
    # regional compilation: only the repeated blocks, which is where the time goes
    for i, block in enumerate(model.blocks):
        model.blocks[i] = torch.compile(block, backend=backend)
    return model


def make_loader(n, cfg, batch_size):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, cfg["image"], cfg["image"], generator=g)
    y = torch.randint(0, cfg["classes"], (n,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--output-dir", default=None)
    args = parser.parse_args()

    accelerator = Accelerator(cpu=True)
    model = compile_blocks(TinyViT(CONFIG), args.backend)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loader = make_loader(64, CONFIG, 16)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    model.train()
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        accelerator.print(f"step {step}: loss {loss.item():.3f}")
        if step + 1 >= args.steps:
            break

    out = args.output_dir or tempfile.mkdtemp(prefix="tinyvit-")
    unwrapped = accelerator.unwrap_model(model)
    accelerator.save(unwrapped.state_dict(), os.path.join(out, "model.pt"))
    accelerator.print("saved", len(unwrapped.state_dict()), "tensors")


if __name__ == "__main__":
    main()
