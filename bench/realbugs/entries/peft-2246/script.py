"""P-tuning a small RoBERTa for paraphrase detection (sentence pairs), then reloading it for inference.

The data are sentence pairs generated in code; the model is a tiny RoBERTa built from a config.
"""
import argparse
import os
import random
import tempfile

import torch
from peft import PeftModel, PromptEncoderConfig, get_peft_model
from transformers import RobertaConfig, RobertaForSequenceClassification

SUBJECTS = ["the company", "the team", "the city", "our lab", "the court"]
VERBS = ["announced", "reported", "confirmed", "denied", "delayed"]
OBJECTS = ["the results", "a merger", "new rules", "the budget", "a recall"]
SYNONYMS = {"announced": "declared", "reported": "stated", "confirmed": "verified",
            "denied": "rejected", "delayed": "postponed"}

CONFIG = {
    "num_epochs": 2,
    "lr": 1e-3,
    "batch_size": 8,
    "num_virtual_tokens": 4,
    "encoder_hidden_size": 16,
    "max_len": 24,
}


class PairTokenizer:
    """Word-level tokenizer over the toy vocabulary, RoBERTa-style special tokens."""

    def __init__(self):
        words = sorted({w for s in SUBJECTS + OBJECTS for w in s.split()} | set(VERBS) | set(SYNONYMS.values()))
        self.vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        for w in words:
            self.vocab[w] = len(self.vocab)
        self.pad_token_id = 1

    def __call__(self, a, b, max_len):
        ids = [0] + [self.vocab.get(w, 3) for w in a.split()] + [2, 2] + [self.vocab.get(w, 3) for w in b.split()] + [2]
        ids = ids[:max_len]
        mask = [1] * len(ids) + [0] * (max_len - len(ids))
        return ids + [self.pad_token_id] * (max_len - len(ids)), mask


def make_pairs(n, seed):
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        s, v, o = rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)
        first = f"{s} {v} {o}"
        if rng.random() < 0.5:
            second, label = f"{s} {SYNONYMS[v]} {o}", 1
        else:
            second, label = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}", 0
        pairs.append((first, second, label))
    return pairs


def collate(rows, tok, max_len):
    enc = [tok(a, b, max_len) for a, b, _ in rows]
    return {
        "input_ids": torch.tensor([e[0] for e in enc]),
        "attention_mask": torch.tensor([e[1] for e in enc]),
        "labels": torch.tensor([r[2] for r in rows]),
    }


def build_model(tok):
    config = RobertaConfig(vocab_size=len(tok.vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=64, pad_token_id=1, num_labels=2)
    torch.manual_seed(0)
    return RobertaForSequenceClassification(config)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output-dir", default=None)
    args = parser.parse_args()
    cfg = CONFIG
    tok = PairTokenizer()
    out_dir = args.output_dir or os.path.join(tempfile.mkdtemp(), "roberta-mrpc-ptuning")

    peft_config = PromptEncoderConfig(task_type="SEQ_CLS", num_virtual_tokens=cfg["num_virtual_tokens"],
                                      encoder_hidden_size=cfg["encoder_hidden_size"])
    model = get_peft_model(build_model(tok), peft_config)
    model.print_trainable_parameters()

    train = make_pairs(48, 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
    model.train()
    for epoch in range(cfg["num_epochs"]):
        total = 0.0
        for i in range(0, len(train), cfg["batch_size"]):
            batch = collate(train[i:i + cfg["batch_size"]], tok, cfg["max_len"])
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            total += loss.item()
        print(f"epoch {epoch}: loss {total:.3f}")
    model.save_pretrained(out_dir)

    # Inference, as the guide does it: a fresh base model and the saved adapter.
    inference_model = build_model(tok)
    inference_model = PeftModel.from_pretrained(inference_model, out_dir)
    inference_model.eval()
    a, b, _ = make_pairs(1, 7)[0]
    ids, mask = tok(a, b, cfg["max_len"])
    with torch.no_grad():
        logits = inference_model(input_ids=torch.tensor([ids]), attention_mask=torch.tensor([mask])).logits
    print(a, "|", b, "->", "paraphrase" if logits.argmax(-1).item() == 1 else "different")


if __name__ == "__main__":
    main()
