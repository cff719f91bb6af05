"""Train a small causal LM on release notes, export it, and reload the export for serving.

The training half runs on the workstation; the serving half reloads the exported folder with
`low_cpu_mem_usage=True` (the serving box is tight on RAM, so weights are loaded straight into an
empty model instead of being materialised twice). A tiny Llama built from a config stands in for
the real checkpoint and the notes are written in code.
"""
import argparse
import logging
import math
import os
import random
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("notes-lm")

CONFIG = {
    "hidden_size": 48,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
}
NOTES = [
    "fixed a crash when the cache is empty",
    "added a flag to skip the warmup step",
    "the exporter now keeps the tokenizer files",
    "faster loading of large checkpoints",
    "removed the deprecated serving endpoint",
    "logging is quieter by default",
]


def parse_args():
    ap = argparse.ArgumentParser(description="release-notes language model")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch_size", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--export_dir", default=None, help="where the trained model is saved (temp dir if unset)")
    return ap.parse_args()


def build_vocab():
    words = sorted({w for note in NOTES for w in note.split()})
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for w in words:
        vocab[w] = len(vocab)
    return vocab


def encode(vocab, note, length=16):
    ids = [1] + [vocab[w] for w in note.split()] + [2]
    ids = ids[:length] + [0] * max(0, length - len(ids))
    return ids


def batches(vocab, rng, batch_size):
    while True:
        picked = [rng.choice(NOTES) for _ in range(batch_size)]
        ids = torch.tensor([encode(vocab, n) for n in picked])
        yield ids, (ids != 0).long()


def train(model, vocab, args):
    rng = random.Random(args.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    stream = batches(vocab, rng, args.batch_size)
    for step in range(1, args.steps + 1):
        ids, mask = next(stream)
        labels = ids.masked_fill(mask == 0, -100)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step % 4 == 0:
            log.info("step %d loss %.3f ppl %.1f", step, loss.item(), math.exp(loss.item()))
    return model


def serve(export_dir, vocab):
    log.info("reloading the export from %s for serving", export_dir)
    model = LlamaForCausalLM.from_pretrained(export_dir, low_cpu_mem_usage=True, torch_dtype=torch.float32)
    model.eval()
    inv = {i: w for w, i in vocab.items()}
    prompt = torch.tensor([[1, vocab["fixed"]]])
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=2)
    log.info("sample: %s", " ".join(inv[i] for i in out[0].tolist()[1:]))


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    vocab = build_vocab()
    config = LlamaConfig(vocab_size=len(vocab), pad_token_id=0, bos_token_id=1, eos_token_id=2, **CONFIG)
    model = train(LlamaForCausalLM(config), vocab, args)
    export_dir = args.export_dir or tempfile.mkdtemp(prefix="notes-lm-")
    os.makedirs(export_dir, exist_ok=True)
    model.save_pretrained(export_dir, safe_serialization=True)
    log.info("exported to %s", export_dir)
    serve(export_dir, vocab)


if __name__ == "__main__":
    main()
