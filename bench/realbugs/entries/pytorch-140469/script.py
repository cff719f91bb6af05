"""Dataset distillation by gradient matching: learn a few synthetic images per class whose training
gradients match those of the real data.

The "real" data are generated in code (class = orientation of a stripe pattern); the network is a
small ConvNet.
"""
import argparse

import torch
from torch import nn
import torch.nn.functional as F


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--dlipc", type=int, default=2, help="synthetic images per class")
    p.add_argument("--dllr_img", type=float, default=0.1)
    p.add_argument("--dllr_net", type=float, default=0.01)
    p.add_argument("--dliterations", type=int, default=3)
    p.add_argument("--dldevice", default="cpu")
    return p.parse_args()


def real_data(num_classes, per_class, im_size, seed=0):
    g = torch.Generator().manual_seed(seed)
    xs, ys = [], []
    grid = torch.arange(im_size[0]).float()
    for c in range(num_classes):
        angle = c * 3.14159 / num_classes
        pattern = torch.sin(grid[:, None] * torch.cos(torch.tensor(angle)) + grid[None, :] * torch.sin(torch.tensor(angle)))
        xs.append(pattern.expand(per_class, 1, *im_size) + 0.3 * torch.randn(per_class, 1, *im_size, generator=g))
        ys.append(torch.full((per_class,), c))
    return torch.cat(xs), torch.cat(ys)


class ConvNet(nn.Module):
    def __init__(self, channel, num_classes, width=16):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(channel, width, 3, padding=1), nn.GroupNorm(4, width), nn.ReLU(),
                                  nn.AvgPool2d(2), nn.Conv2d(width, width, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2))
        self.fc = nn.Linear(width * 4 * 4, num_classes)

    def forward(self, x):
        return self.fc(self.body(x).flatten(1))


def match_loss(gw_syn, gw_real):
    loss = 0.0
    for a, b in zip(gw_syn, gw_real):
        loss = loss + (1 - F.cosine_similarity(a.flatten(), b.flatten(), dim=0))
    return loss


def main():
    args = get_args()
    num_classes, channel, im_size = 4, 1, (16, 16)
    images_real, labels_real = real_data(num_classes, 32, im_size)

    image_syn = torch.randn(size=(num_classes * args.dlipc, channel, im_size[0], im_size[1]), dtype=torch.float,
                            requires_grad=True, device=args.dldevice) * 0.01
    label_syn = torch.arange(num_classes).repeat_interleave(args.dlipc)
    optimizer_img = torch.optim.SGD([image_syn, ], lr=args.dllr_img, momentum=0.5)

    for it in range(args.dliterations):
        net = ConvNet(channel, num_classes).to(args.dldevice)
        params = list(net.parameters())
        loss_real = F.cross_entropy(net(images_real), labels_real)
        gw_real = [g.detach() for g in torch.autograd.grad(loss_real, params)]
        loss_syn = F.cross_entropy(net(image_syn), label_syn)
        gw_syn = torch.autograd.grad(loss_syn, params, create_graph=True)
        loss = match_loss(gw_syn, gw_real)
        optimizer_img.zero_grad()
        loss.backward()
        optimizer_img.step()
        print(f"iteration {it}: matching loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
