"""Prefix tuning a small Qwen3 chat model on a handful of support answers.

The base model is frozen; only the virtual prefix (key/value vectors prepended in every layer)
is trained. A tiny Qwen3 built from a config stands in for the 0.6B checkpoint: like the real
one it sets `head_dim` explicitly, and uses grouped-query attention. The data is a few
question/answer pairs written in code, tokenised with a word-level vocabulary built from them.
"""
import argparse
import math

import torch
from peft import PrefixTuningConfig, TaskType, get_peft_model
from tokenizers import Tokenizer, models, pre_tokenizers
from torch.utils.data import DataLoader
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

PAIRS = [
    ("how do i reset my password", "open settings and choose reset password"),
    ("where is my invoice", "invoices are listed under billing"),
    ("can i change my plan", "yes you can change the plan at any time"),
    ("how do i delete my account", "write to support and we delete it"),
    ("is there a mobile app", "the app is available for both phones"),
    ("why was i charged twice", "a second charge is refunded within days"),
]

CONFIG = {
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,            # the checkpoint's head_dim is not hidden_size / heads either
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "max_position_embeddings": 128,
}


def parse_args():
    ap = argparse.ArgumentParser(description="prefix tuning on support answers")
    ap.add_argument("--num_virtual_tokens", type=int, default=10)
    ap.add_argument("--batch_size", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-2)
    ap.add_argument("--max_len", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<unk>": 0, "<pad>": 1, "<eos>": 2, "Q:": 3, "A:": 4}
    for question, answer in PAIRS:
        for word in f"{question} {answer}".split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="<eos>", model_input_names=["input_ids", "attention_mask"])


def make_batches(tokenizer, batch_size, max_len):
    texts = [f"Q: {q} A: {a} <eos>" for q, a in PAIRS]

    def collate(chunk):
        enc = tokenizer(chunk, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
        labels = enc["input_ids"].clone()
        labels[enc["attention_mask"] == 0] = -100
        enc["labels"] = labels
        return enc

    return DataLoader(texts, batch_size=batch_size, shuffle=True, collate_fn=collate)


def build_model(vocab_size, tokenizer):
    config = Qwen3Config(vocab_size=vocab_size, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True, **CONFIG)
    return Qwen3ForCausalLM(config)


def train(model, loader, epochs, lr):
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    for epoch in range(epochs):
        total, steps = 0.0, 0
        for batch in loader:
            out = model(**batch)
            out.loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            total += out.loss.item()
            steps += 1
        print(f"epoch {epoch}: loss {total / steps:.3f} ppl {math.exp(total / steps):.1f}")


@torch.no_grad()
def answer(model, tokenizer, question):
    model.eval()
    enc = tokenizer(f"Q: {question} A:", return_tensors="pt")
    ids = model.generate(**enc, max_new_tokens=8, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(ids[0], skip_special_tokens=True)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    tokenizer = build_tokenizer()
    model = build_model(len(tokenizer), tokenizer)
    peft_config = PrefixTuningConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=args.num_virtual_tokens)
    model = get_peft_model(model, peft_config)
    model.print_trainable_parameters()
    loader = make_batches(tokenizer, args.batch_size, args.max_len)
    train(model, loader, args.epochs, args.lr)
    print(answer(model, tokenizer, PAIRS[0][0]))


if __name__ == "__main__":
    main()
