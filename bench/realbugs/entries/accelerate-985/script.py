"""Serve a small sequence tagger with Accelerate's big-model utilities.

The tagger (embedding, a stack of residual MLP blocks, a tagging head) is trained elsewhere; here
a checkpoint is written from a freshly initialised copy, the model is rebuilt with empty weights,
the checkpoint is loaded, and the model is dispatched with a "balanced" placement so the same
script spreads the blocks over whatever devices the serving box has (CPU only here). Inputs are
token ids generated in code.
"""
import argparse
import logging
import os
import tempfile

import torch
from torch import nn
from accelerate import dispatch_model, init_empty_weights
from accelerate.utils import set_seed

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("serve")

CONFIG = {"vocab_size": 50, "hidden": 32, "n_blocks": 4, "n_tags": 5}


class Block(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.ff = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(), nn.Linear(2 * hidden, hidden))

    def forward(self, x):
        return x + self.ff(self.norm(x))


class Tagger(nn.Module):
    def __init__(self, vocab_size, hidden, n_blocks, n_tags):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden)
        self.blocks = nn.ModuleList([Block(hidden) for _ in range(n_blocks)])
        self.head = nn.Linear(hidden, n_tags)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def parse_args():
    ap = argparse.ArgumentParser(description="dispatch a tagger and tag a batch")
    ap.add_argument("--placement", default="balanced", help="device placement strategy")
    ap.add_argument("--batch", type=int, default=3)
    ap.add_argument("--seq_len", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def write_checkpoint(folder):
    trained = Tagger(**CONFIG)
    path = os.path.join(folder, "tagger.pt")
    torch.save(trained.state_dict(), path)
    log.info("checkpoint written: %s (%d tensors)", path, len(trained.state_dict()))
    return path


def load_tagger(path):
    with init_empty_weights():
        model = Tagger(**CONFIG)
    state = torch.load(path, map_location="cpu")
    model.load_state_dict(state, assign=True)
    model.eval()
    return model


def main():
    args = parse_args()
    set_seed(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        model = load_tagger(write_checkpoint(folder))
        log.info("placing the tagger with device_map=%r", args.placement)
        model = dispatch_model(model, device_map=args.placement)
        ids = torch.randint(0, CONFIG["vocab_size"], (args.batch, args.seq_len))
        with torch.no_grad():
            tags = model(ids).argmax(-1)
        log.info("tags:\n%s", tags)


if __name__ == "__main__":
    main()
