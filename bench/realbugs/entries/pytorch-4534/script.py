"""Train an MLP with batch normalisation on fixed-size feature vectors (128 features per sample).

The features and labels are generated in code; the dataset size is whatever the split leaves.
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split


class FeatureMLP(nn.Module):
    def __init__(self, in_features=128, hidden=64, classes=3):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
            nn.Linear(hidden, classes),
        )

    def forward(self, x):
        return self.net(x)


def make_dataset(n, features, classes, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, features, generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    x = centers[y] + 0.5 * torch.randn(n, features, generator=g)
    return TensorDataset(x, y)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=41)
    parser.add_argument("--val-fraction", type=float, default=0.2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-2)
    args = parser.parse_args()

    full = make_dataset(args.samples, 128, 3, seed=0)
    n_val = int(len(full) * args.val_fraction)
    train_set, val_set = random_split(full, [len(full) - n_val, n_val], generator=torch.Generator().manual_seed(1))
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=args.batch_size)

    model = FeatureMLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        model.train()
        for x, y in train_loader:
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            correct = sum((model(x).argmax(-1) == y).sum().item() for x, y in val_loader)
        print(f"epoch {epoch}: loss {loss.item():.3f}, val acc {correct / max(n_val, 1):.2f}")


if __name__ == "__main__":
    main()
