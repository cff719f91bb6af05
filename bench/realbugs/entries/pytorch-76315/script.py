"""Train a small spectrogram encoder and export it to TorchScript for the serving box.

The training side wraps the encoder in nn.DataParallel (the same code runs on the multi-GPU
workstation; on a CPU-only machine DataParallel just calls the module), saves a checkpoint the
way the training cluster does, then the export step rebuilds the model, loads the checkpoint and
scripts it so the C++ service can load it without Python. Spectrogram patches are generated in code.
"""
import argparse
import io
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("encoder-export")

CONFIG = {"n_mels": 16, "frames": 24, "channels": [8, 16], "embed_dim": 32, "n_classes": 4}


def parse_args():
    ap = argparse.ArgumentParser(description="train and export the spectrogram encoder")
    ap.add_argument("--samples", type=int, default=96)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch_size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=5)
    return ap.parse_args()


def make_patches(n, cfg, gen):
    """Each class is a tone at its own mel band, with noise; returns (N, 1, mels, frames)."""
    labels = torch.randint(0, cfg["n_classes"], (n,), generator=gen)
    x = 0.1 * torch.randn(n, 1, cfg["n_mels"], cfg["frames"], generator=gen)
    t = torch.arange(cfg["frames"], dtype=torch.float32)
    for i, label in enumerate(labels.tolist()):
        band = 2 + 3 * label
        x[i, 0, band] += 1.0 + 0.3 * torch.sin(2 * math.pi * t / 8)
    return x, labels


class Encoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c1, c2 = cfg["channels"]
        self.conv1 = nn.Conv2d(1, c1, 3, padding=1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
        self.proj = nn.Linear(c2, cfg["embed_dim"])
        self.classifier = nn.Linear(cfg["embed_dim"], cfg["n_classes"])

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.relu(self.conv2(h)).mean(dim=(2, 3))
        return self.classifier(torch.tanh(self.proj(h)))


def build(cfg):
    # same wrapper on every machine, so checkpoints carry the "module." prefix everywhere
    return nn.DataParallel(Encoder(cfg))


def train(model, x, y, args):
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        perm = torch.randperm(len(x))
        for i in range(0, len(x), args.batch_size):
            idx = perm[i:i + args.batch_size]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        log.info("epoch %d loss %.4f", epoch, loss.item())


def export(checkpoint, cfg, sample):
    encoder = build(cfg)
    encoder.load_state_dict(checkpoint["state_dict"])
    encoder.eval()
    scripted = torch.jit.script(encoder)
    with torch.no_grad():
        drift = (scripted(sample) - encoder(sample)).abs().max().item()
    log.info("scripted encoder matches eager (max diff %.2e)", drift)
    buffer = io.BytesIO()
    torch.jit.save(scripted, buffer)
    return buffer.getbuffer().nbytes


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    x, y = make_patches(args.samples, CONFIG, gen)
    model = build(CONFIG)
    train(model, x, y, args)
    checkpoint = {"state_dict": model.state_dict(), "config": CONFIG}
    size = export(checkpoint, CONFIG, x[:4])
    log.info("exported %d bytes", size)


if __name__ == "__main__":
    main()
