"""Crop padded feature maps from a conv encoder and regroup them into patches for a small head.

The images are generated in code; the encoder pads, so the valid region is cropped out of its
output before the features are regrouped.
"""
import argparse

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, channels=20):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, channels, 3, padding=2), nn.ReLU(),
                                  nn.Conv2d(channels, channels, 3, padding=1))

    def forward(self, x):
        return self.conv(x)


class PatchHead(nn.Module):
    """Regroups the cropped features into `groups` blocks and scores each one."""

    def __init__(self, groups, group_shape):
        super().__init__()
        self.groups, self.group_shape = groups, group_shape
        numel = group_shape[0] * group_shape[1] * group_shape[2]
        self.score = nn.Linear(numel, 1)

    def forward(self, feats):
        grouped = feats.view(self.groups, *self.group_shape)
        return self.score(grouped.flatten(1)).squeeze(-1)


def crop_valid(feats, trim_channels, trim_rows):
    # the last channels are padding channels and the last rows are border rows
    return feats[:, :-trim_channels, :-trim_rows, ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=23)
    parser.add_argument("--height", type=int, default=32)
    parser.add_argument("--width", type=int, default=13)
    args = parser.parse_args()

    torch.manual_seed(0)
    images = torch.randn(args.batch, 3, args.height, args.width)
    encoder = Encoder()
    feats = encoder(images)                       # (23, 20, 34, 15)
    print("encoder output", tuple(feats.shape))
    feats = crop_valid(feats, trim_channels=3, trim_rows=2)
    print("cropped", tuple(feats.shape))
    head = PatchHead(groups=32, group_shape=(15, 23, 17))
    scores = head(feats)
    print("scores", tuple(scores.shape), scores.mean().item())


if __name__ == "__main__":
    main()
