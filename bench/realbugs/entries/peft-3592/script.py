"""Fault classification on vibration windows: a LoRA-tuned MLP shipped to several scoring workers.

A small encoder (a stack of linear blocks) is pretrained once; per site it gets a LoRA adapter on
its projections, and the classification head is trained fully (kept as modules_to_save). After a
short fine-tune the adapter's state dict is held in memory and stamped onto one fresh model per
scoring worker, so every worker scores the same batch of windows. Data is generated in code.
"""
import argparse
import logging
import math

import torch
from torch import nn
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("fault-clf")

CONFIG = {
    "window": 32,
    "hidden": 48,
    "blocks": 2,
    "classes": 3,          # healthy, imbalance, bearing wear
    "lora_r": 4,
    "lora_alpha": 8,
    "lr": 1e-2,
}


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(x + torch.relu(self.proj(x)))


class FaultNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed = nn.Linear(cfg["window"], cfg["hidden"])
        self.blocks = nn.ModuleList(Block(cfg["hidden"]) for _ in range(cfg["blocks"]))
        self.head = nn.Linear(cfg["hidden"], cfg["classes"])

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def make_windows(n, window, generator):
    t = torch.linspace(0, 2 * math.pi, window)
    labels = torch.randint(0, 3, (n,), generator=generator)
    base = torch.sin(4 * t).repeat(n, 1)
    wobble = torch.sin(t).repeat(n, 1) * (labels == 1).float().unsqueeze(1)
    spikes = (torch.rand(n, window, generator=generator) > 0.9).float() * (labels == 2).float().unsqueeze(1)
    noise = 0.05 * torch.randn(n, window, generator=generator)
    return base + wobble + spikes + noise, labels


def lora_config(cfg):
    return LoraConfig(r=cfg["lora_r"], lora_alpha=cfg["lora_alpha"], lora_dropout=0.0,
                      target_modules=["proj"], modules_to_save=["head"])


def build_model(cfg, seed):
    torch.manual_seed(seed)
    return get_peft_model(FaultNet(cfg), lora_config(cfg))


def fine_tune(model, x, y, steps, lr):
    optim = torch.optim.AdamW((p for p in model.parameters() if p.requires_grad), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for step in range(steps):
        optim.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optim.step()
        if step % 10 == 0:
            log.info("step %d loss %.4f", step, loss.item())
    return model


@torch.no_grad()
def score(model, x, y):
    model.eval()
    preds = model(x).argmax(-1)
    return (preds == y).float().mean().item()


def main():
    ap = argparse.ArgumentParser(description="site adapter fine-tune and fan-out to scoring workers")
    ap.add_argument("--train", type=int, default=96)
    ap.add_argument("--eval", type=int, default=48)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()

    gen = torch.Generator().manual_seed(args.seed)
    x_train, y_train = make_windows(args.train, CONFIG["window"], gen)
    x_eval, y_eval = make_windows(args.eval, CONFIG["window"], gen)

    model = build_model(CONFIG, args.seed)
    model.print_trainable_parameters()
    fine_tune(model, x_train, y_train, args.steps, CONFIG["lr"])
    log.info("trainer accuracy %.3f", score(model, x_eval, y_eval))

    # one in-memory checkpoint, stamped onto every worker's fresh copy of the base model
    adapter_state = get_peft_model_state_dict(model)
    log.info("adapter checkpoint: %d tensors", len(adapter_state))
    results = {}
    for worker in range(args.workers):
        replica = build_model(CONFIG, seed=args.seed)  # same pretrained base on every worker
        outcome = set_peft_model_state_dict(replica, adapter_state)
        if outcome.unexpected_keys:
            log.warning("worker %d: unexpected keys %s", worker, outcome.unexpected_keys)
        results[worker] = score(replica, x_eval, y_eval)
        log.info("worker %d accuracy %.3f", worker, results[worker])
    print("worker accuracies:", results)


if __name__ == "__main__":
    main()
