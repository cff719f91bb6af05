"""Hand-gesture clips for the kiosk camera: swipe left / swipe right / wave (tiny VideoMAE, clips in code).

Clips are rendered with numpy as the camera delivers them (frames x height x width x RGB, uint8), sampled
to a fixed number of frames, scaled and normalised with the camera's channel statistics, and batched into
a 5-D video tensor for a small VideoMAE classifier trained from scratch.

    python videomae_gesture_clips.py --epochs 2 --frames 8
"""
import argparse
import logging
import math
import time

import numpy as np
import torch
from transformers import VideoMAEConfig, VideoMAEForVideoClassification

log = logging.getLogger("gestures")

GESTURES = ["swipe_left", "swipe_right", "wave"]
CAMERA = {"height": 32, "width": 32, "fps": 15, "seconds": 1.2,
          "mean": [0.45, 0.45, 0.45], "std": [0.225, 0.225, 0.225]}
BACKBONE = dict(image_size=32, patch_size=16, num_channels=3, tubelet_size=2, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=2, intermediate_size=64, use_mean_pooling=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--frames", type=int, default=8)
    p.add_argument("--clips-per-gesture", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=6)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=4)
    return p.parse_args()


def render_clip(gesture, rng):
    """A bright hand blob moving over a noisy background: (T, H, W, 3) uint8, as the camera sends it."""
    n = int(CAMERA["fps"] * CAMERA["seconds"])
    h, w = CAMERA["height"], CAMERA["width"]
    yy, xx = np.mgrid[0:h, 0:w]
    frames = rng.integers(0, 40, size=(n, h, w, 3), dtype=np.uint8)
    for t in range(n):
        phase = t / (n - 1)
        if gesture == "swipe_left":
            cx, cy = (1 - phase) * (w - 1), h / 2
        elif gesture == "swipe_right":
            cx, cy = phase * (w - 1), h / 2
        else:
            cx, cy = w / 2 + 8 * math.sin(4 * math.pi * phase), h / 3
        blob = ((xx - cx) ** 2 + (yy - cy) ** 2) < 20
        frames[t][blob] = (220, 180, 150)
    return frames


def sample_frames(clip, num_frames):
    idx = np.linspace(0, len(clip) - 1, num_frames).round().astype(int)
    return clip[idx]


def preprocess(clip, num_frames):
    """uint8 (T, H, W, C) -> normalised float (C, T, H, W), the layout video backbones take."""
    frames = torch.from_numpy(sample_frames(clip, num_frames)).float() / 255.0
    mean = torch.tensor(CAMERA["mean"]).view(1, 1, 1, 3)
    std = torch.tensor(CAMERA["std"]).view(1, 1, 1, 3)
    frames = (frames - mean) / std
    return frames.permute(3, 0, 1, 2).contiguous()


def build_dataset(args):
    rng = np.random.default_rng(args.seed)
    videos, labels = [], []
    for label, gesture in enumerate(GESTURES):
        for _ in range(args.clips_per_gesture):
            videos.append(preprocess(render_clip(gesture, rng), args.frames))
            labels.append(label)
    order = torch.randperm(len(videos), generator=torch.Generator().manual_seed(args.seed))
    return torch.stack(videos)[order], torch.tensor(labels)[order]


def accuracy(model, videos, labels):
    model.eval()
    with torch.no_grad():
        pred = model(pixel_values=videos).logits.argmax(-1)
    model.train()
    return (pred == labels).float().mean().item()


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(args.seed)
    videos, labels = build_dataset(args)
    log.info("dataset: videos %s %s, labels %s", tuple(videos.shape), videos.dtype, labels.bincount().tolist())
    config = VideoMAEConfig(num_frames=args.frames, num_labels=len(GESTURES), **BACKBONE)
    model = VideoMAEForVideoClassification(config)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    for epoch in range(args.epochs):
        t0, losses = time.perf_counter(), []
        for start in range(0, len(videos), args.batch_size):
            batch = videos[start:start + args.batch_size]
            out = model(pixel_values=batch, labels=labels[start:start + args.batch_size])
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            losses.append(out.loss.item())
        log.info("epoch %d loss %.3f acc %.2f (%.1fs)", epoch, sum(losses) / len(losses),
                 accuracy(model, videos, labels), time.perf_counter() - t0)


if __name__ == "__main__":
    main()
