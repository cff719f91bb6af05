"""Topic classification of short news headlines with a BERT classifier and the Trainer.

Headlines fall into four desks (sport, finance, tech, weather). The model is evaluated and saved
once per epoch and the best checkpoint is reloaded at the end. Metrics come from small metric
objects with a `load(name)` / `.compute(...)` interface (like the `evaluate` library's), made
thread safe because the team also uses them from a background scorer. A tiny BERT built from a
config stands in for `bert-base-uncased`; headlines are generated in code.
"""
import argparse
import logging
import random
import threading

import numpy as np
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import (BertConfig, BertForSequenceClassification, DataCollatorWithPadding,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments)

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("desk-classifier")

DESKS = {
    "sport": ["local team wins the cup final", "striker signs a new contract", "marathon record falls again"],
    "finance": ["shares slide as rates rise", "bank reports record profit", "inflation eases for third month"],
    "tech": ["new phone launches next week", "chip maker opens a factory", "app update fixes battery drain"],
    "weather": ["storm warning for the coast", "heatwave to last the weekend", "snow expected in the hills"],
}
CLASSES = list(DESKS)
PREFIXES = ["breaking :", "update :", "", "live :"]


class StreamingMetric:
    """A tiny metric object: accumulates batches under a lock, then computes one number."""

    def __init__(self, name):
        self.name = name
        self._lock = threading.Lock()
        self._preds, self._refs = [], []

    def add_batch(self, predictions, references):
        with self._lock:
            self._preds.extend(int(p) for p in predictions)
            self._refs.extend(int(r) for r in references)

    def compute(self, predictions=None, references=None, average="micro"):
        if predictions is not None:
            self.add_batch(predictions, references)
        with self._lock:
            preds, refs = np.array(self._preds), np.array(self._refs)
            self._preds, self._refs = [], []
        correct = float((preds == refs).mean()) if len(preds) else 0.0
        # with micro averaging over single-label classes, precision, recall and f1 equal accuracy
        return {self.name: correct}


def load(name):
    return StreamingMetric(name)


def parse_args():
    ap = argparse.ArgumentParser(description="news desk classifier")
    ap.add_argument("--per_desk", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--output_dir", default="./results")
    return ap.parse_args()


def make_headlines(rng, per_desk):
    rows = []
    for label, desk in enumerate(CLASSES):
        for _ in range(per_desk):
            rows.append((f"{rng.choice(PREFIXES)} {rng.choice(DESKS[desk])}".strip(), label))
    rng.shuffle(rows)
    return rows


def build_tokenizer():
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for text in [t for texts in DESKS.values() for t in texts] + PREFIXES:
        for word in text.split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def encode(tokenizer, rows):
    return [{**tokenizer(f"[CLS] {text} [SEP]", add_special_tokens=False), "labels": label} for text, label in rows]


def compute_metrics(eval_pred):
    accuracy = load("accuracy")
    precision = load("precision")
    f1 = load("f1")
    recall = load("recall")

    predictions, labels = eval_pred
    predictions = np.argmax(predictions, axis=1)

    accuracy.compute(predictions=predictions, references=labels)
    precision.compute(predictions=predictions, references=labels, average="micro")
    f1.compute(predictions=predictions, references=labels, average="micro")
    recall.compute(predictions=predictions, references=labels, average="micro")

    return {"accuracy": accuracy, "precision": precision, "f1": f1, "recall": recall}


def main():
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    tokenizer = build_tokenizer()
    train = encode(tokenizer, make_headlines(rng, args.per_desk))
    valid = encode(tokenizer, make_headlines(rng, args.per_desk // 2))
    log.info("train %d headlines, validation %d, %d desks", len(train), len(valid), len(CLASSES))

    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=len(CLASSES),
                        pad_token_id=tokenizer.pad_token_id)
    model = BertForSequenceClassification(config)

    training_args = TrainingArguments(
        output_dir=args.output_dir, overwrite_output_dir=True, learning_rate=args.lr,
        per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=args.batch_size,
        num_train_epochs=args.epochs, optim="adamw_torch", weight_decay=0.01,
        evaluation_strategy="epoch", save_strategy="epoch", load_best_model_at_end=True,
        no_cuda=True, skip_memory_metrics=True, logging_steps=5, report_to=[], seed=args.seed)
    trainer = Trainer(model=model, args=training_args, train_dataset=train, eval_dataset=valid,
                      tokenizer=tokenizer, data_collator=DataCollatorWithPadding(tokenizer),
                      compute_metrics=compute_metrics)
    trainer.train()
    log.info("final evaluation: %s", trainer.evaluate())


if __name__ == "__main__":
    main()
