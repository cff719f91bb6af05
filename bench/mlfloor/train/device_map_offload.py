"""Serve a checkpoint that does not fit the (pretend) RAM budget: keep the embeddings and the
first blocks in memory, offload the remaining transformer blocks to disk.

The script first exports a small GPT-2 checkpoint (standing in for the real one), then plans a
device_map block by block from a memory budget and reloads the checkpoint with it.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import GPT2Config, GPT2LMHeadModel

log = logging.getLogger("offload")

ARCH = dict(n_layer=4, n_embd=32, n_head=2, vocab_size=120, n_positions=64)
BYTES_PER_PARAM = {"float32": 4, "float16": 2, "bfloat16": 2}


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--budget-kb", type=float, default=40.0, help="in-memory budget for blocks")
    p.add_argument("--dtype", default="float32", choices=sorted(BYTES_PER_PARAM))
    p.add_argument("--offload-dir", default=None)
    p.add_argument("--keep", action="store_true", help="keep the exported checkpoint")
    return p.parse_args()


def export_checkpoint(root: Path) -> Path:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**ARCH, bos_token_id=1, eos_token_id=1))
    out = root / "gpt2-small-export"
    model.save_pretrained(out)
    log.info("exported %d params to %s", model.num_parameters(), out)
    return out


def block_sizes(config: GPT2Config, dtype: str) -> list[int]:
    d = config.n_embd
    per_block = 12 * d * d + 13 * d  # attn + mlp + norms
    return [per_block * BYTES_PER_PARAM[dtype]] * config.n_layer


def plan_device_map(config: GPT2Config, budget_bytes: float, dtype: str) -> dict[str, str]:
    """Embeddings on CPU, then blocks on CPU while they fit, the rest on disk."""
    device_map = {"transformer.wte": "cpu", "transformer.wpe": "cpu"}
    used = 0
    for i, size in enumerate(block_sizes(config, dtype)):
        where = "cpu" if used + size <= budget_bytes else "disk"
        used += size if where == "cpu" else 0
        device_map[f"transformer.h.{i}"] = where
    return device_map


def describe(device_map):
    counts = {}
    for dev in device_map.values():
        counts[dev] = counts.get(dev, 0) + 1
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))


def load_offloaded(path: Path, device_map, dtype: str, offload_dir: str):
    return GPT2LMHeadModel.from_pretrained(
        path, device_map=device_map, dtype=getattr(torch, dtype),
        offload_folder=offload_dir, offload_state_dict=True,
    )


def smoke_test(model):
    ids = torch.tensor([[1, 5, 7, 9]])
    with torch.no_grad():
        logits = model(ids).logits
    log.info("smoke test ok: logits %s", tuple(logits.shape))


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = parse_args()
    root = Path(tempfile.mkdtemp(prefix="offload-"))
    try:
        ckpt = export_checkpoint(root)
        config = GPT2Config.from_pretrained(ckpt)
        device_map = plan_device_map(config, args.budget_kb * 1024, args.dtype)
        log.info("device_map: %s", describe(device_map))
        offload_dir = args.offload_dir or str(root / "offload")
        model = load_offloaded(ckpt, device_map, args.dtype, offload_dir)
        smoke_test(model)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
