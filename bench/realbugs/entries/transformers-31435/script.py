"""Sentence completion with a small GPT-2: finish each prompt up to the end of its sentence.

A tiny GPT-2 is trained for a few steps on a handful of sentences, then asked to complete
prompts; generation should stop at the first full stop or line break (`stop_strings`), so each
completion is exactly one sentence. The byte-level tokenizer is built from our corpus and the model
from a config, so everything runs offline.
"""
import argparse

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

CORPUS = [
    "the cat sat on the mat.",
    "the dog ran to the park.",
    "a bird sang in the tree.",
    "the sun rose over the hill.",
    "we walked home in the rain.",
    "the children played in the garden.",
]
PROMPTS = ["the cat", "a bird sang", "we walked"]
SENTENCE_END = [".", "\n"]


def parse_args():
    ap = argparse.ArgumentParser(description="one-sentence completions")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--max_new_tokens", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def build_tokenizer():
    """Byte-level BPE like GPT-2's: every byte is a token, plus whole words of our corpus."""
    vocab = {"<|endoftext|>": 0}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab.setdefault(symbol, len(vocab))
    merges = []
    for line in CORPUS:
        for i, word in enumerate(line.rstrip(".").split()):
            piece = word if i == 0 else "\u0120" + word
            # merge the word left to right, one character at a time
            for j in range(1, len(piece)):
                left, right = piece[:j], piece[j]
                if (left, right) not in merges:
                    merges.append((left, right))
                vocab.setdefault(left + right, len(vocab))
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tok = GPT2TokenizerFast(tokenizer_object=backend, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                            unk_token="<|endoftext|>")
    tok.pad_token = tok.eos_token
    return tok


def build_model(vocab_size, seed):
    # stands in for GPT2LMHeadModel.from_pretrained("distilbert/distilgpt2")
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab_size, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return GPT2LMHeadModel(config)


def train(model, tokenizer, steps, lr):
    batch = tokenizer([line + "\n" for line in CORPUS], return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        loss = model(**batch, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step:3d}  loss {loss.item():.3f}")
    model.eval()


def complete(model, tokenizer, prompt, max_new_tokens):
    inputs = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                             stop_strings=SENTENCE_END, tokenizer=tokenizer,
                             pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    model = build_model(len(tokenizer), args.seed)
    print(f"vocabulary {len(tokenizer)}, parameters {sum(p.numel() for p in model.parameters())}")
    train(model, tokenizer, args.steps, args.lr)
    for prompt in PROMPTS:
        print(f"{prompt!r} -> {complete(model, tokenizer, prompt, args.max_new_tokens)!r}")


if __name__ == "__main__":
    main()
