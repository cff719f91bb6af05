"""Intent classification for a small customer-service bot, fine-tuned with the Trainer.

The model is evaluated every epoch and the checkpoint with the best macro F1 is kept
(`load_best_model_at_end`), with up to three checkpoints on disk. The validation split is
scored once more after training. A tiny BERT built from a config stands in for the Chinese
checkpoint we fine-tune in production; utterances are generated in code.
"""
import argparse
import random

import numpy as np
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import (BertConfig, BertForSequenceClassification, DataCollatorWithPadding,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments)

INTENTS = {
    "refund": ["i want my money back", "please refund this order", "how do i get a refund"],
    "delivery": ["where is my package", "my order has not arrived", "when will it be delivered"],
    "account": ["i forgot my password", "how do i change my email", "my account is locked"],
}
PREFIXES = ["", "hi , ", "hello , ", "excuse me , "]


def parse_args():
    ap = argparse.ArgumentParser(description="intent classifier")
    ap.add_argument("--per_intent", type=int, default=12)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch_size", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--output_dir", default="./checkpoints")
    return ap.parse_args()


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_utterances(rng, per_intent):
    rows = []
    for label, intent in enumerate(INTENTS):
        for _ in range(per_intent):
            rows.append({"text": rng.choice(PREFIXES) + rng.choice(INTENTS[intent]), "label": label})
    rng.shuffle(rows)
    return rows


def build_tokenizer():
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, ",": 4}
    for texts in INTENTS.values():
        for text in texts:
            for word in text.split():
                vocab.setdefault(word, len(vocab))
    for prefix in PREFIXES:
        for word in prefix.split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", model_input_names=["input_ids", "attention_mask"])


def macro_f1(preds, labels, n_classes):
    scores = []
    for c in range(n_classes):
        tp = int(((preds == c) & (labels == c)).sum())
        fp = int(((preds == c) & (labels != c)).sum())
        fn = int(((preds != c) & (labels == c)).sum())
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def compute_metrics(eval_pred):
    logits, labels = eval_pred
    return {"f1": macro_f1(np.argmax(logits, axis=-1), labels, len(INTENTS))}


def main():
    args = parse_args()
    seed_everything(args.seed)
    rng = random.Random(args.seed)
    tokenizer = build_tokenizer()
    rows = [{**tokenizer(r["text"], truncation=True, max_length=32), "labels": r["label"]}
            for r in make_utterances(rng, args.per_intent)]
    cut = int(0.8 * len(rows))
    train_ds, val_ds = rows[:cut], rows[cut:]
    print(f"train: {len(train_ds)}  validation: {len(val_ds)}")

    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=len(INTENTS),
                        pad_token_id=tokenizer.pad_token_id)
    model = BertForSequenceClassification(config)

    train_args = TrainingArguments(output_dir=args.output_dir, per_device_train_batch_size=args.batch_size,
                                   per_device_eval_batch_size=1, logging_steps=1, evaluation_strategy="epoch",
                                   save_strategy="epoch", save_total_limit=3, learning_rate=args.lr,
                                   weight_decay=0.01, num_train_epochs=args.epochs, dataloader_drop_last=True,
                                   metric_for_best_model="f1", load_best_model_at_end=True, report_to=[],
                                   seed=args.seed)
    trainer = Trainer(model=model, args=train_args, train_dataset=train_ds,
                      data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=compute_metrics)
    trainer.train()
    print(trainer.evaluate(val_ds))


if __name__ == "__main__":
    main()
