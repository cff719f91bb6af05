"""Toy GAN on a 2-D mixture of Gaussians arranged on a ring.

Generator maps noise to points in the plane, discriminator scores points as real/fake. Both losses
are built from one forward pass per step (the fake batch goes through D once) to save compute,
the way many tutorial GANs are written. Logs the losses and how many ring modes the generator
covers.
"""
import argparse
import math
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class Config:
    noise_dim: int = 8
    g_hidden: int = 64
    d_hidden: int = 128
    modes: int = 8
    radius: float = 2.0
    std: float = 0.05
    batch_size: int = 64
    steps: int = 300
    lr_g: float = 1e-4
    lr_d: float = 1e-4
    log_every: int = 50


def ring_sampler(cfg, gen):
    angles = torch.arange(cfg.modes) * (2 * math.pi / cfg.modes)
    centres = torch.stack([cfg.radius * torch.cos(angles), cfg.radius * torch.sin(angles)], dim=1)

    def sample(n):
        idx = torch.randint(0, cfg.modes, (n,), generator=gen)
        return centres[idx] + cfg.std * torch.randn(n, 2, generator=gen)

    return sample, centres


def build_generator(cfg):
    return nn.Sequential(
        nn.Linear(cfg.noise_dim, cfg.g_hidden),
        nn.ReLU(),
        nn.Linear(cfg.g_hidden, cfg.g_hidden),
        nn.ReLU(),
        nn.Linear(cfg.g_hidden, 2),
    )


def build_discriminator(cfg):
    return nn.Sequential(
        nn.Linear(2, cfg.d_hidden),
        nn.ReLU(),
        nn.Linear(cfg.d_hidden, 1),
        nn.Sigmoid(),
    )


def modes_covered(points, centres, tol=0.3):
    dists = torch.cdist(points, centres)
    nearest, which = dists.min(dim=1)
    return len(set(which[nearest < tol].tolist()))


def train(cfg, seed):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    sample_real, centres = ring_sampler(cfg, gen)
    G, D = build_generator(cfg), build_discriminator(cfg)
    opt_g = torch.optim.Adam(G.parameters(), lr=cfg.lr_g)
    opt_d = torch.optim.Adam(D.parameters(), lr=cfg.lr_d)
    eps = 1e-7

    for step in range(1, cfg.steps + 1):
        real = sample_real(cfg.batch_size)
        noise = torch.randn(cfg.batch_size, cfg.noise_dim)
        fake = G(noise)

        p_real = D(real)
        p_fake = D(fake)
        d_loss = -torch.mean(torch.log(p_real + eps) + torch.log(1.0 - p_fake + eps))
        g_loss = torch.mean(torch.log(1.0 - p_fake + eps))

        # discriminator update; keep the graph since the generator loss shares p_fake
        opt_d.zero_grad()
        d_loss.backward(retain_graph=True)
        opt_d.step()

        # generator update through the same discriminator output
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()

        if step % cfg.log_every == 0:
            with torch.no_grad():
                pts = G(torch.randn(512, cfg.noise_dim))
            print(f"step {step:4d}  d_loss {d_loss.item():.4f}  g_loss {g_loss.item():.4f}  "
                  f"modes {modes_covered(pts, centres)}/{cfg.modes}")
    return G, D


def main():
    ap = argparse.ArgumentParser(description="ring-of-Gaussians GAN")
    ap.add_argument("--steps", type=int, default=Config.steps)
    ap.add_argument("--batch-size", type=int, default=Config.batch_size)
    ap.add_argument("--modes", type=int, default=Config.modes)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    cfg = Config(steps=args.steps, batch_size=args.batch_size, modes=args.modes)
    print(cfg)
    train(cfg, args.seed)


if __name__ == "__main__":
    main()
