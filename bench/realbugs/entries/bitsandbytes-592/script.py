"""Train a small bag-of-words intent classifier and ship an 8-bit compressed checkpoint.

The embedding table uses bitsandbytes' StableEmbedding (layer-normed embedding recommended for
8-bit optimizers, so the same model can later be fine-tuned with Adam8bit on a GPU box). On this
laptop training runs with plain AdamW; after training every weight matrix is compressed with
bitsandbytes' blockwise 8-bit quantization and the round-trip error is reported before saving.
"""
import argparse
import io
import random

import torch
import torch.nn as nn
import bitsandbytes as bnb
import bitsandbytes.functional as bnbF

INTENTS = {
    "weather": ["will it rain", "forecast for tomorrow", "is it sunny", "how cold is it", "weather today"],
    "music": ["play some jazz", "next song please", "turn up the volume", "play my playlist", "pause music"],
    "timer": ["set a timer", "ten minute timer", "cancel the timer", "how long is left", "start a countdown"],
}


def build_vocab(intents):
    words = sorted({w for phrases in intents.values() for p in phrases for w in p.split()})
    return {w: i + 1 for i, w in enumerate(words)}  # 0 is padding


def encode(phrase, vocab, max_len):
    ids = [vocab.get(w, 0) for w in phrase.split()][:max_len]
    return ids + [0] * (max_len - len(ids))


def make_dataset(intents, vocab, max_len, copies, rng):
    labels = sorted(intents)
    rows = []
    for _ in range(copies):
        for li, name in enumerate(labels):
            for phrase in intents[name]:
                words = phrase.split()
                rng.shuffle(words)
                rows.append((encode(" ".join(words), vocab, max_len), li))
    rng.shuffle(rows)
    x = torch.tensor([r[0] for r in rows])
    y = torch.tensor([r[1] for r in rows])
    return x, y, labels


class IntentModel(nn.Module):
    def __init__(self, vocab_size, dim, n_classes):
        super().__init__()
        self.embed = bnb.nn.StableEmbedding(vocab_size, dim, padding_idx=0)
        self.hidden = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, n_classes)

    def forward(self, ids):
        mask = (ids != 0).unsqueeze(-1).float()
        pooled = (self.embed(ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.out(torch.relu(self.hidden(pooled)))


def compress_state_dict(model):
    packed, worst = {}, 0.0
    for name, tensor in model.state_dict().items():
        if tensor.dtype != torch.float32 or tensor.dim() < 2:
            packed[name] = tensor
            continue
        q, state = bnbF.quantize_blockwise(tensor.contiguous())
        restored = bnbF.dequantize_blockwise(q, state)
        worst = max(worst, (restored - tensor).abs().max().item())
        packed[name] = {"q": q, "state": state, "shape": tuple(tensor.shape)}
    return packed, worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--max-len", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)

    vocab = build_vocab(INTENTS)
    x, y, labels = make_dataset(INTENTS, vocab, args.max_len, copies=8, rng=rng)
    model = IntentModel(len(vocab) + 1, args.dim, len(labels))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        for start in range(0, len(x), 16):
            logits = model(x[start:start + 16])
            loss = loss_fn(logits, y[start:start + 16])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch % 10 == 9:
            acc = (model(x).argmax(-1) == y).float().mean().item()
            print(f"epoch {epoch + 1} loss {loss.item():.4f} acc {acc:.3f}")

    packed, worst = compress_state_dict(model)
    buf = io.BytesIO()
    torch.save({"vocab": vocab, "labels": labels, "weights": packed}, buf)
    print(f"8-bit checkpoint {buf.tell()} bytes, worst round-trip error {worst:.4f}")


if __name__ == "__main__":
    main()
