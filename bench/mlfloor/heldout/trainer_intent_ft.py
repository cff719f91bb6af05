"""Fine-tune a small BERT intent classifier with the HF Trainer on an in-code utterance set.

    python trainer_intent_ft.py --epochs 1 --batch-size 4 --output-dir /tmp/intent_ft
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import tempfile
from dataclasses import dataclass

import numpy as np
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import (BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast,
                          Trainer, TrainerCallback, TrainingArguments, set_seed)

logger = logging.getLogger("intent_ft")

INTENTS = ["greet", "weather", "book_table", "goodbye"]
UTTERANCES = {
    "greet": ["hello there", "hi how are you", "good morning", "hey friend"],
    "weather": ["will it rain today", "what is the weather", "is it sunny tomorrow",
                "how cold is it outside"],
    "book_table": ["book a table for two", "reserve a table tonight", "i want a table for four",
                   "can you book dinner"],
    "goodbye": ["bye for now", "see you later", "good night", "talk to you tomorrow"],
}


@dataclass
class ModelArgs:
    hidden_size: int = 32
    num_layers: int = 2
    num_heads: int = 4
    max_len: int = 12
    dropout: float = 0.1


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output-dir", default=os.path.join(tempfile.gettempdir(), "intent_ft"))
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--eval-fraction", type=float, default=0.25)
    return p.parse_args()


def build_tokenizer(max_len: int) -> PreTrainedTokenizerFast:
    words = sorted({w for utts in UTTERANCES.values() for u in utts for w in u.split()})
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + words)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", pad_token="[PAD]",
                                  cls_token="[CLS]", sep_token="[SEP]")
    tok.model_max_length = max_len
    return tok


class IntentDataset(torch.utils.data.Dataset):
    def __init__(self, rows, tokenizer, max_len):
        self.rows = rows
        self.enc = tokenizer([text for text, _ in rows], padding="max_length", truncation=True,
                             max_length=max_len, return_tensors="pt")

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.enc["input_ids"][i],
                "attention_mask": self.enc["attention_mask"][i],
                "intent_id": torch.tensor(self.rows[i][1])}


def split_rows(eval_fraction: float, seed: int):
    rows = [(u, INTENTS.index(k)) for k, utts in UTTERANCES.items() for u in utts]
    random.Random(seed).shuffle(rows)
    n_eval = max(1, int(len(rows) * eval_fraction))
    return rows[n_eval:], rows[:n_eval]


def collate(features):
    return {k: torch.stack([f[k] for f in features]) for k in features[0]}


def compute_metrics(eval_pred):
    logits, labels = eval_pred
    preds = np.argmax(logits, axis=-1)
    return {"accuracy": float((preds == labels).mean())}


class LossLoggerCallback(TrainerCallback):
    def __init__(self):
        self.history = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.history.append((state.global_step, logs["loss"]))
            logger.info("step %d loss %.4f", state.global_step, logs["loss"])


def build_model(margs: ModelArgs, vocab_size: int, pad_id: int):
    config = BertConfig(vocab_size=vocab_size, hidden_size=margs.hidden_size,
                        num_hidden_layers=margs.num_layers, num_attention_heads=margs.num_heads,
                        intermediate_size=margs.hidden_size * 2,
                        max_position_embeddings=margs.max_len + 4,
                        hidden_dropout_prob=margs.dropout, num_labels=len(INTENTS),
                        pad_token_id=pad_id, id2label=dict(enumerate(INTENTS)),
                        label2id={n: i for i, n in enumerate(INTENTS)})
    return BertForSequenceClassification(config)


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args = parse_args()
    margs = ModelArgs()
    set_seed(args.seed)
    tokenizer = build_tokenizer(margs.max_len)
    train_rows, eval_rows = split_rows(args.eval_fraction, args.seed)
    train_ds = IntentDataset(train_rows, tokenizer, margs.max_len)
    eval_ds = IntentDataset(eval_rows, tokenizer, margs.max_len)
    logger.info("train=%d eval=%d vocab=%d", len(train_ds), len(eval_ds), len(tokenizer))

    model = build_model(margs, len(tokenizer), tokenizer.pad_token_id)
    training_args = TrainingArguments(
        output_dir=args.output_dir, num_train_epochs=args.epochs, learning_rate=args.lr,
        per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=args.batch_size,
        eval_strategy="epoch", save_strategy="no", logging_steps=1, report_to=[],
        use_cpu=not torch.cuda.is_available(), seed=args.seed, disable_tqdm=True)
    loss_logger = LossLoggerCallback()
    trainer = Trainer(model=model, args=training_args, train_dataset=train_ds,
                      eval_dataset=eval_ds, data_collator=collate,
                      compute_metrics=compute_metrics, callbacks=[loss_logger])
    result = trainer.train()
    logger.info("train result: %s", result.metrics)
    metrics = trainer.evaluate()
    logger.info("eval: %s", metrics)
    trainer.save_model(os.path.join(args.output_dir, "final"))
    tokenizer.save_pretrained(os.path.join(args.output_dir, "final"))


if __name__ == "__main__":
    main()
