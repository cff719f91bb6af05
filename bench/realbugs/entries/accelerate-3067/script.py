"""Train a small regression model with a Lion optimiser under accelerate, checkpoint it, and resume.

Data are generated in code; the optimiser is a compact Lion implementation kept in this file.
"""
import argparse
import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from accelerate import Accelerator
from accelerate.utils import set_seed

CONFIG = {"in_features": 16, "hidden": 32, "lr": 3e-4, "betas": (0.9, 0.99), "weight_decay": 0.01,
          "batch_size": 8, "epochs": 2, "checkpoint_every": 4}


class Lion(torch.optim.Optimizer):
    """Sign-momentum optimiser (EvoLved Sign Momentum)."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                exp_avg = state["exp_avg"]
                p.mul_(1 - group["lr"] * group["weight_decay"])
                update = exp_avg.mul(b1).add(p.grad, alpha=1 - b1).sign_()
                p.add_(update, alpha=-group["lr"])
                exp_avg.mul_(b2).add_(p.grad, alpha=1 - b2)
        return loss


def make_data(n, cfg):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, cfg["in_features"], generator=g)
    w = torch.randn(cfg["in_features"], 1, generator=g)
    y = x @ w + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def build(cfg):
    model = nn.Sequential(nn.Linear(cfg["in_features"], cfg["hidden"]), nn.SiLU(), nn.Linear(cfg["hidden"], 1))
    opt = Lion(model.parameters(), lr=cfg["lr"], betas=cfg["betas"], weight_decay=cfg["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 10))
    return model, opt, sched


def train(accelerator, model, opt, sched, loader, cfg, out_dir):
    step = 0
    for epoch in range(cfg["epochs"]):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            if step % cfg["checkpoint_every"] == 0:
                path = os.path.join(out_dir, f"checkpoint-{step}")
                accelerator.save_state(path)
                accelerator.print(f"step {step}: loss {loss.item():.4f}, saved {os.path.basename(path)}")
    return step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--resume", action="store_true", default=True)
    args = parser.parse_args()
    cfg = CONFIG
    out_dir = args.output_dir or tempfile.mkdtemp(prefix="lion-run-")

    set_seed(42)
    accelerator = Accelerator(cpu=True)
    loader = DataLoader(make_data(64, cfg), batch_size=cfg["batch_size"], shuffle=True)
    model, opt, sched = build(cfg)
    model, opt, loader, sched = accelerator.prepare(model, opt, loader, sched)
    last = train(accelerator, model, opt, sched, loader, cfg, out_dir)

    if args.resume:
        # A second session resumes from the newest checkpoint.
        newest = max((d for d in os.listdir(out_dir) if d.startswith("checkpoint-")),
                     key=lambda d: int(d.split("-")[1]))
        accelerator.print(f"resuming from {newest} (trained {last} steps)")
        accelerator.load_state(os.path.join(out_dir, newest))
        accelerator.print("resumed at step", accelerator.step)


if __name__ == "__main__":
    main()
