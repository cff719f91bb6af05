"""Sentiment scoring of short movie reviews with a DeBERTa-v2 regressor and the Trainer.

Reviews are scored in [0, 1] (one output, regression). Two held-out sets are tracked during
training, a validation split and a test split, passed to the Trainer as a dict so both get their
own eval_* metrics. The Trainer is subclassed to print banners around each evaluation. A tiny
DeBERTa-v2 built from a config stands in for the large checkpoint; reviews are generated in code.
"""
import argparse
import random

import numpy as np
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import (DataCollatorWithPadding, DebertaV2Config, DebertaV2ForSequenceClassification,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments)

POSITIVE = ["a moving and funny film", "brilliant acting and a sharp script", "warm , clever and beautifully shot"]
NEGATIVE = ["a dull and lifeless mess", "the plot is thin and the jokes fall flat", "tedious , long and forgettable"]
OPENERS = ["honestly ,", "overall", "in short ,", "for me"]


def parse_args():
    ap = argparse.ArgumentParser(description="review sentiment regression")
    ap.add_argument("--train_size", type=int, default=48)
    ap.add_argument("--eval_size", type=int, default=12)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--eval_steps", type=int, default=4)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--output_dir", default="review-regressor")
    return ap.parse_args()


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_reviews(rng, n):
    reviews = []
    for _ in range(n):
        positive = rng.random() < 0.5
        text = f"{rng.choice(OPENERS)} {rng.choice(POSITIVE if positive else NEGATIVE)}"
        reviews.append((text, 1.0 if positive else 0.0))
    return reviews


def build_tokenizer():
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for phrase in POSITIVE + NEGATIVE + OPENERS:
        for word in phrase.split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def encode(tokenizer, reviews):
    return [{**tokenizer(f"[CLS] {text} [SEP]", add_special_tokens=False), "labels": score} for text, score in reviews]


def compute_metrics(eval_pred):
    preds, labels = eval_pred
    preds = preds.reshape(-1)
    return {"mse": float(((preds - labels) ** 2).mean()), "acc": float(((preds > 0.5) == (labels > 0.5)).mean())}


class VerboseTrainer(Trainer):
    """Prints a banner around every evaluation so the runs are easy to follow in the logs."""

    def evaluate(self, **kwargs):
        print("\n> EVALUATING >\n")
        metrics = super().evaluate(**kwargs)
        print(metrics)
        print("\n< EVALUATING DONE <\n")


def main():
    args = parse_args()
    seed_everything(args.seed)
    rng = random.Random(args.seed)
    tokenizer = build_tokenizer()
    train = encode(tokenizer, make_reviews(rng, args.train_size))
    eval_sets = {"validation": encode(tokenizer, make_reviews(rng, args.eval_size)),
                 "test": encode(tokenizer, make_reviews(rng, args.eval_size))}

    config = DebertaV2Config(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, max_position_embeddings=64, num_labels=1,
                             pad_token_id=tokenizer.pad_token_id)
    model = DebertaV2ForSequenceClassification(config)
    training_args = TrainingArguments(output_dir=args.output_dir, num_train_epochs=args.epochs,
                                      per_device_train_batch_size=args.batch_size,
                                      per_device_eval_batch_size=args.batch_size, learning_rate=args.lr,
                                      evaluation_strategy="steps", eval_steps=args.eval_steps, logging_steps=2,
                                      save_strategy="no", report_to=[], seed=args.seed)
    trainer = VerboseTrainer(model=model, args=training_args, train_dataset=train, eval_dataset=eval_sets,
                             tokenizer=tokenizer, data_collator=DataCollatorWithPadding(tokenizer),
                             compute_metrics=compute_metrics)
    trainer.train()
    print("final:", {name: trainer.predict(data).metrics for name, data in eval_sets.items()})


if __name__ == "__main__":
    main()
