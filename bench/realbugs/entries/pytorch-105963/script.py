"""Model registry: keep a shape-only copy of every experiment's checkpoint.

Full checkpoints are large, so the registry stores a "skeleton" of each one: the same
state_dict keys with every tensor moved to the meta device (shapes and dtypes, no data). Before
a training job is scheduled, the registry checks that the code's model still matches the stored
skeleton by loading the skeleton into a freshly built model with load_state_dict, which checks
the keys and shapes. The models here are small MLP/embedding classifiers built in code.
"""
import argparse
import json
import os

import torch
from torch import nn

EXPERIMENTS = {
    "intent-small": {"vocab": 500, "embed": 32, "hidden": [64], "classes": 6},
    "intent-wide": {"vocab": 500, "embed": 48, "hidden": [128, 64], "classes": 6},
    "topic-base": {"vocab": 800, "embed": 32, "hidden": [96], "classes": 12},
}


class BagOfWordsClassifier(nn.Module):
    def __init__(self, vocab, embed, hidden, classes, dropout=0.1):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab, embed, mode="mean")
        layers, width = [], embed
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU(), nn.Dropout(dropout)]
            width = size
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, classes)

    def forward(self, token_ids, offsets):
        return self.head(self.body(self.embedding(token_ids, offsets)))


def parse_args():
    ap = argparse.ArgumentParser(description="register shape-only checkpoints and check them")
    ap.add_argument("--registry", default="model-registry")
    ap.add_argument("--experiments", nargs="*", default=sorted(EXPERIMENTS))
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def build_model(spec):
    return BagOfWordsClassifier(spec["vocab"], spec["embed"], spec["hidden"], spec["classes"])


def smoke_batch(spec, generator):
    lengths = torch.randint(3, 9, (4,), generator=generator)
    token_ids = torch.randint(0, spec["vocab"], (int(lengths.sum()),), generator=generator)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    return token_ids, offsets


def skeleton_of(model):
    """The state_dict with every tensor on the meta device: keys, shapes and dtypes only."""
    return {name: tensor.to("meta") for name, tensor in model.state_dict().items()}


def register(registry, name, spec, model):
    folder = os.path.join(registry, name)
    os.makedirs(folder, exist_ok=True)
    torch.save(skeleton_of(model), os.path.join(folder, "skeleton.pt"))
    with open(os.path.join(folder, "spec.json"), "w") as f:
        json.dump(spec, f, indent=2)
    size = sum(t.numel() for t in model.state_dict().values())
    print(f"registered {name}: {size} values in the full checkpoint, skeleton only on disk")


def check_compatible(registry, name, spec):
    """Build the model from the current code and make sure the stored skeleton fits it."""
    skeleton = torch.load(os.path.join(registry, name, "skeleton.pt"))
    fresh = build_model(spec)
    result = fresh.load_state_dict(skeleton)
    print(f"{name}: compatible ({result})")
    return True


def main():
    args = parse_args()
    generator = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    for name in args.experiments:
        spec = EXPERIMENTS[name]
        model = build_model(spec)
        token_ids, offsets = smoke_batch(spec, generator)
        logits = model(token_ids, offsets)
        print(f"{name}: smoke forward ok, logits {tuple(logits.shape)}")
        register(args.registry, name, spec, model)

    report = {}
    for name in args.experiments:
        report[name] = check_compatible(args.registry, name, EXPERIMENTS[name])
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
