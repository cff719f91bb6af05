"""Language-specific X-MOD classification: load the checkpoint folder our model registry synced
(config + weights), pick the language adapter, and score a few sentences.

The registry mirrors Hub repositories file by file; here the synced folder is produced in code
from a small X-MOD config, with exactly the files the upstream repository has.
"""
import argparse
import json
import os
import tempfile

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, XmodConfig, XmodForSequenceClassification

LANGUAGES = ["en_XX", "de_DE"]
SENTENCES = {"en_XX": ["the service was great", "the food was cold"],
             "de_DE": ["der service war toll", "das essen war kalt"]}


def sync_checkpoint(folder):
    """What the registry sync leaves on disk for the upstream repository: config and weights only."""
    config = XmodConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, languages=LANGUAGES, default_language="en_XX", num_labels=2)
    torch.manual_seed(0)
    XmodForSequenceClassification(config).save_pretrained(folder)
    with open(os.path.join(folder, "registry.json"), "w") as f:
        json.dump({"source": "facebook/xmod-base", "files": sorted(os.listdir(folder))}, f)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--language", default="de_DE", choices=LANGUAGES)
    ap.add_argument("--max_length", type=int, default=16)
    return ap.parse_args()


def score(model, tokenizer, sentences, max_length):
    batch = tokenizer(sentences, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits
    return logits.softmax(-1)[:, 1].tolist()


def report(rows):
    width = max(len(s) for _, s in rows)
    for p, sentence in rows:
        print(f"{sentence:<{width}}  {p:.3f}")


def main():
    args = parse_args()
    folder = os.path.join(tempfile.mkdtemp(), "xmod-base")
    sync_checkpoint(folder)

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    model.set_default_language(args.language)
    model.eval()
    probs = score(model, tokenizer, SENTENCES[args.language], args.max_length)
    report(list(zip(probs, SENTENCES[args.language])))


if __name__ == "__main__":
    main()
