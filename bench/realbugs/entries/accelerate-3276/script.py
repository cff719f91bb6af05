"""Shard a small transformer-style model across the available devices before serving it.

The model is plain torch, built from a config dict; the device map comes from accelerate.
"""
import argparse
import json

import torch
from torch import nn
from accelerate import dispatch_model
from accelerate.utils import compute_module_sizes, infer_auto_device_map

MODEL_CONFIG = {"vocab_size": 500, "d_model": 64, "n_heads": 4, "n_layers": 4, "d_ff": 128, "max_len": 64}


class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ff(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        self.pos = nn.Embedding(cfg["max_len"], cfg["d_model"])
        self.blocks = nn.ModuleList(Block(cfg["d_model"], cfg["n_heads"], cfg["d_ff"]) for _ in range(cfg["n_layers"]))
        self.norm = nn.LayerNorm(cfg["d_model"])
        self.head = nn.Linear(cfg["d_model"], cfg["vocab_size"], bias=False)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.embed(ids) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def describe(model):
    sizes = compute_module_sizes(model)
    total = sizes[""]
    print(f"model: {sum(p.numel() for p in model.parameters())} parameters, {total / 1024:.1f} KiB")
    for name, _ in model.named_children():
        print(f"  {name}: {sizes[name] / 1024:.1f} KiB")


@torch.no_grad()
def greedy(model, prompt, steps):
    ids = prompt
    for _ in range(steps):
        nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
    return ids


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-memory", default=None, help='JSON, e.g. {"cpu": "1GiB"}; default: what is free')
    parser.add_argument("--new-tokens", type=int, default=8)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = TinyLM(MODEL_CONFIG).eval()
    describe(model)
    max_memory = json.loads(args.max_memory) if args.max_memory else None
    device_map = infer_auto_device_map(model, max_memory=max_memory, no_split_module_classes=["Block"])
    print("device map:", device_map)
    model = dispatch_model(model, device_map=device_map)
    prompt = torch.randint(0, MODEL_CONFIG["vocab_size"], (1, 5))
    print(greedy(model, prompt, args.new_tokens).tolist())


if __name__ == "__main__":
    main()
