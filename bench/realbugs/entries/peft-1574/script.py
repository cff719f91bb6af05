"""Train two LoRA adapters for a small sentiment classifier, then switch between them for evaluation.

Everything is built in code: a toy vocabulary, a tiny BERT from a config, a few labelled sentences.
"""
import argparse
import os
import random
import tempfile

import torch
from peft import LoraConfig, PeftModel, TaskType, get_peft_model
from transformers import BertConfig, BertForSequenceClassification

POSITIVE = ["great", "lovely", "fine", "happy", "good", "nice"]
NEGATIVE = ["awful", "sad", "bad", "poor", "ugly", "grim"]
FILLER = ["the", "movie", "was", "really", "quite", "plot", "acting", "very"]


def build_vocab():
    words = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"] + POSITIVE + NEGATIVE + FILLER
    return {w: i for i, w in enumerate(words)}


def make_dataset(n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.randint(0, 1)
        sentiment = rng.choice(POSITIVE if label else NEGATIVE)
        words = rng.sample(FILLER, 4) + [sentiment]
        rng.shuffle(words)
        rows.append((" ".join(words), label))
    return rows


def encode(rows, vocab, max_len=12):
    ids, mask, labels = [], [], []
    for text, label in rows:
        toks = [vocab["[CLS]"]] + [vocab.get(w, vocab["[UNK]"]) for w in text.split()] + [vocab["[SEP]"]]
        toks = toks[:max_len]
        pad = max_len - len(toks)
        ids.append(toks + [vocab["[PAD]"]] * pad)
        mask.append([1] * len(toks) + [0] * pad)
        labels.append(label)
    return torch.tensor(ids), torch.tensor(mask), torch.tensor(labels)


def base_model(vocab_size):
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=2)
    torch.manual_seed(0)
    return BertForSequenceClassification(config)


def train_adapter(vocab, seed, out_dir, steps, lr):
    model = base_model(len(vocab))
    lora = LoraConfig(task_type=TaskType.SEQ_CLS, r=2, lora_alpha=4, lora_dropout=0.1,
                      target_modules=["query", "value"])
    model = get_peft_model(model, lora)
    ids, mask, labels = encode(make_dataset(64, seed), vocab)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    for step in range(steps):
        idx = torch.randint(0, len(ids), (16,))
        out = model(input_ids=ids[idx], attention_mask=mask[idx], labels=labels[idx])
        out.loss.backward()
        opt.step()
        opt.zero_grad()
    print(f"adapter seed={seed}: final loss {out.loss.item():.4f}")
    model.save_pretrained(out_dir)
    return out_dir


@torch.no_grad()
def accuracy(model, vocab, seed):
    ids, mask, labels = encode(make_dataset(32, seed), vocab)
    model.eval()
    pred = model(input_ids=ids, attention_mask=mask).logits.argmax(-1)
    return (pred == labels).float().mean().item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--work-dir", default=None)
    args = parser.parse_args()

    vocab = build_vocab()
    work = args.work_dir or tempfile.mkdtemp(prefix="two-adapters-")
    clean_dir = train_adapter(vocab, 1, os.path.join(work, "clean_model"), args.steps, args.lr)
    merge_dir = train_adapter(vocab, 2, os.path.join(work, "merge_model"), args.steps, args.lr)

    # Evaluation: one base model, the first adapter as the default, then both under their own names.
    model = PeftModel.from_pretrained(base_model(len(vocab)), clean_dir)
    model.load_adapter(clean_dir, adapter_name="id_1")
    model.load_adapter(merge_dir, adapter_name="id_2")
    for name in ["id_1", "id_2"]:
        model.set_adapter(name)
        print(f"{name}: accuracy {accuracy(model, vocab, 3):.3f}")


if __name__ == "__main__":
    main()
