"""IA3 fine-tuning of a small protein-sequence classifier, then reload the adapter for scoring.

The encoder mimics the layout of the ESM-style models we use (pre-norm attention with a fused
qkv projection, a SwiGLU feed-forward); it is built small and random here, with a few toy
sequences written in code, so the adapter round trip can be checked on a laptop.
"""
import argparse
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from peft import IA3Config, PeftModel, get_peft_model

AMINO = "ACDEFGHIKLMNPQRSTVWY"
SEQUENCES = [("MKTAYIAKQR", 1), ("GAVLIPFMWC", 0), ("KRKRKRHHDE", 1), ("AAAAGGGGLL", 0),
             ("MKLVVLGAGG", 0), ("DEDEKRKRST", 1), ("WWFFYYLLII", 0), ("STNQKRDEHH", 1)]


class SwiGLU(nn.Module):
    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return F.silu(a) * b


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.layernorm_qkv = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 3 * dim, bias=False))
        self.out_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.layernorm_qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.out_proj(out.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attn = Attention(dim, heads)
        self.ffn = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim, bias=False), SwiGLU(),
                                 nn.Linear(2 * dim, dim, bias=False))

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.ffn(x)


class SequenceClassifier(nn.Module):
    def __init__(self, vocab, dim=32, heads=4, layers=6, labels=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.classifier = nn.Linear(dim, labels)

    def forward(self, input_ids):
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.classifier(x.mean(dim=1))


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def encode(batch):
    ids = [[AMINO.index(c) + 1 for c in seq] for seq, _ in batch]
    return torch.tensor(ids), torch.tensor([label for _, label in batch])


def linear_layers(model):
    """Every projection inside the encoder blocks, by full name (the head stays frozen)."""
    return [name for name, module in model.named_modules() if isinstance(module, nn.Linear) and name.startswith("blocks.")]


def train(model, epochs, lr):
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    input_ids, labels = encode(SEQUENCES)
    for epoch in range(epochs):
        loss = F.cross_entropy(model(input_ids), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    base = SequenceClassifier(len(AMINO) + 1, layers=args.layers)
    targets = linear_layers(base)
    feedforward = [name for name in targets if name.endswith("ffn.3")]
    print(f"{len(targets)} target modules, {len(feedforward)} feed-forward")

    config = IA3Config(target_modules=targets, feedforward_modules=feedforward, modules_to_save=["classifier"])
    model = get_peft_model(base, config)
    model.print_trainable_parameters()
    train(model, args.epochs, args.lr)

    with tempfile.TemporaryDirectory() as out:
        model.save_pretrained(out)
        torch.manual_seed(args.seed)
        fresh_base = SequenceClassifier(len(AMINO) + 1, layers=args.layers)
        reloaded = PeftModel.from_pretrained(fresh_base, out)
        reloaded.eval()
        with torch.no_grad():
            input_ids, labels = encode(SEQUENCES)
            accuracy = (reloaded(input_ids).argmax(-1) == labels).float().mean().item()
        print(f"reloaded adapter accuracy: {accuracy:.2f}")


if __name__ == "__main__":
    main()
