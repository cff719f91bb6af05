"""Spiral classification with a small MLP, watching gradient norms per layer.

Backward hooks on every Linear layer record the norm of the gradient flowing out of it, so that
vanishing or exploding gradients show up in the epoch log. After every epoch the whole network is
checkpointed with torch.save so that it can be reloaded without the class definition at hand.
The two-arm spiral data set is generated in code.
"""
import argparse
import logging
import math
import os
import random
import tempfile
from collections import defaultdict

import torch
from torch import nn

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("spiral")


def parse_args():
    ap = argparse.ArgumentParser(description="MLP on a two-arm spiral with gradient monitoring")
    ap.add_argument("--points_per_arm", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--ckpt_dir", default=None, help="where checkpoints go (a temporary folder by default)")
    return ap.parse_args()


def make_spiral(n, noise, rng):
    xs, ys = [], []
    for label in (0, 1):
        for i in range(n):
            r = i / n * 3.0
            t = 1.75 * i / n * 2 * math.pi + label * math.pi
            xs.append([r * math.sin(t) + rng.gauss(0, noise), r * math.cos(t) + rng.gauss(0, noise)])
            ys.append(label)
    return torch.tensor(xs), torch.tensor(ys)


def build_model(hidden, depth):
    layers, width = [], 2
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), nn.Tanh()]
        width = hidden
    layers.append(nn.Linear(width, 2))
    return nn.Sequential(*layers)


def attach_grad_monitor(model):
    """Record the output-gradient norm of each Linear layer on every backward pass."""
    norms = defaultdict(list)
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            module.register_full_backward_hook(
                lambda mod, grad_in, grad_out, name=name: norms[name].append(grad_out[0].norm().item()))
    return norms


def batches(x, y, batch_size, rng):
    order = list(range(len(x)))
    rng.shuffle(order)
    for start in range(0, len(order), batch_size):
        idx = torch.tensor(order[start:start + batch_size])
        yield x[idx], y[idx]


def train_epoch(model, opt, x, y, args, rng):
    model.train()
    total, correct = 0.0, 0
    for xb, yb in batches(x, y, args.batch_size, rng):
        logits = model(xb)
        loss = nn.functional.cross_entropy(logits, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item() * len(xb)
        correct += (logits.argmax(-1) == yb).sum().item()
    return total / len(x), correct / len(x)


def save_checkpoint(model, ckpt_dir, epoch):
    path = os.path.join(ckpt_dir, f"spiral-mlp-epoch{epoch}.pt")
    torch.save(model, path)
    log.info("saved %s", path)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    ckpt_dir = args.ckpt_dir or tempfile.mkdtemp(prefix="spiral-ckpt-")
    os.makedirs(ckpt_dir, exist_ok=True)

    x, y = make_spiral(args.points_per_arm, 0.05, rng)
    model = build_model(args.hidden, args.depth)
    norms = attach_grad_monitor(model)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        loss, acc = train_epoch(model, opt, x, y, args, rng)
        summary = ", ".join(f"{k}={sum(v) / len(v):.3f}" for k, v in sorted(norms.items()))
        log.info("epoch %d loss %.4f acc %.3f | grad norms %s", epoch, loss, acc, summary)
        norms.clear()
        save_checkpoint(model, ckpt_dir, epoch)


if __name__ == "__main__":
    main()
