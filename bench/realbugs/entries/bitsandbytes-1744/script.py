"""Magnitude-prune a small MLP, then store its weights 8-bit blockwise-quantized for a CPU server.

The model is built here from a config dict; pruning zeroes whole input groups of the first
layer, which is what the structured pruning schedule produces. Everything runs on the CPU.
"""
import argparse

import torch
from torch import nn
from bitsandbytes.functional import dequantize_blockwise, quantize_blockwise

CONFIG = {"in_features": 256, "hidden": 256, "classes": 10}


def build(cfg):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(cfg["in_features"], cfg["hidden"]), nn.ReLU(), nn.Linear(cfg["hidden"], cfg["classes"]))


def structured_prune(model, group, keep_ratio):
    """Zero the weakest contiguous groups of weights in each linear layer (by L1 norm)."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            w = module.weight.data.view(-1)
            groups = w[: w.numel() // group * group].view(-1, group)
            norms = groups.abs().sum(dim=1)
            n_drop = int(len(norms) * (1 - keep_ratio))
            drop = norms.argsort()[:n_drop]
            groups[drop] = 0.0
    return model


def sparsity(model):
    total = zeros = 0
    for p in model.parameters():
        total += p.numel()
        zeros += (p == 0).sum().item()
    return zeros / total


def pack(model, blocksize):
    return {name: quantize_blockwise(p.detach().flatten(), blocksize=blocksize)
            for name, p in model.named_parameters() if p.dim() == 2}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--block-size", type=int, default=256)
    parser.add_argument("--prune-group", type=int, default=256)
    parser.add_argument("--keep", type=float, default=0.5)
    args = parser.parse_args()

    model = structured_prune(build(CONFIG), args.prune_group, args.keep)
    print(f"sparsity after pruning: {sparsity(model):.2%}")
    packed = pack(model, args.block_size)
    for name, (q, state) in packed.items():
        restored = dequantize_blockwise(q, quant_state=state)
        original = dict(model.named_parameters())[name].detach().flatten()
        print(f"{name}: {q.numel()} bytes, max abs err {(restored - original).abs().max().item():.4f}")


if __name__ == "__main__":
    main()
