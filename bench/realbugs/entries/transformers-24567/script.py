"""Headline summarisation of short news items with a small mT5 and the Seq2SeqTrainer.

Each article is paired with a headline; both sides are tokenised to a fixed length and the
headline's attention mask is kept as `decoder_attention_mask`, so padded headline positions are
masked in the decoder as well as in the loss. Evaluation generates headlines
(`predict_with_generate`) and scores them with a token-overlap F1. A tiny mT5 built from a config
stands in for `google/mt5-small`; articles are generated in code.
"""
import argparse
import random

import numpy as np
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import (DataCollatorForSeq2Seq, MT5Config, MT5ForConditionalGeneration, PreTrainedTokenizerFast,
                          Seq2SeqTrainer, Seq2SeqTrainingArguments)

TOPICS = {
    "flood": ("heavy rain floods the river valley and roads close", "river valley flooded"),
    "election": ("voters choose a new mayor after a close count", "new mayor elected"),
    "match": ("the home team wins the final with a late goal", "home team wins final"),
    "market": ("shares fall as energy prices climb again", "shares fall on energy prices"),
}
FILLERS = ["officials said on monday", "local reports confirm", "according to residents", "early today"]

CONFIG = {"source_len": 24, "target_len": 8, "d_model": 32, "layers": 2, "heads": 4}


def parse_args():
    ap = argparse.ArgumentParser(description="headline generation with mT5")
    ap.add_argument("--n_train", type=int, default=32)
    ap.add_argument("--n_eval", type=int, default=8)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--eval_steps", type=int, default=2)
    ap.add_argument("--batch_size", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--output_dir", default="headline-mt5")
    return ap.parse_args()


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_articles(rng, n):
    rows = []
    for _ in range(n):
        body, headline = TOPICS[rng.choice(sorted(TOPICS))]
        rows.append({"article": f"{rng.choice(FILLERS)} , {body}", "headline": headline})
    return rows


def build_tokenizer():
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, ",": 3}
    for body, headline in TOPICS.values():
        for word in (body + " " + headline).split():
            vocab.setdefault(word, len(vocab))
    for filler in FILLERS:
        for word in filler.split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                   model_input_names=["input_ids", "attention_mask"])


def encode(rows, tokenizer):
    features = []
    for row in rows:
        source = tokenizer(row["article"] + " </s>", max_length=CONFIG["source_len"], padding="max_length",
                           truncation=True)
        target = tokenizer(row["headline"] + " </s>", max_length=CONFIG["target_len"], padding="max_length",
                           truncation=True)
        labels = [t if m else -100 for t, m in zip(target["input_ids"], target["attention_mask"])]
        features.append({"input_ids": source["input_ids"], "attention_mask": source["attention_mask"],
                         "labels": labels, "decoder_attention_mask": target["attention_mask"]})
    return features


def make_metrics(tokenizer):
    def compute_metrics(eval_pred):
        preds, labels = eval_pred
        labels = np.where(labels == -100, tokenizer.pad_token_id, labels)
        scores = []
        for p, l in zip(tokenizer.batch_decode(preds, skip_special_tokens=True),
                        tokenizer.batch_decode(labels, skip_special_tokens=True)):
            p, l = set(p.split()), set(l.split())
            overlap = len(p & l)
            scores.append(0.0 if not overlap else 2 * overlap / (len(p) + len(l)))
        return {"token_f1": float(np.mean(scores))}
    return compute_metrics


def main():
    args = parse_args()
    seed_everything(args.seed)
    rng = random.Random(args.seed)
    tokenizer = build_tokenizer()
    train_ds = encode(make_articles(rng, args.n_train), tokenizer)
    eval_ds = encode(make_articles(rng, args.n_eval), tokenizer)

    config = MT5Config(vocab_size=len(tokenizer), d_model=CONFIG["d_model"], d_kv=8, d_ff=64,
                       num_layers=CONFIG["layers"], num_decoder_layers=CONFIG["layers"], num_heads=CONFIG["heads"],
                       pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                       decoder_start_token_id=tokenizer.pad_token_id)
    model = MT5ForConditionalGeneration(config)
    print(f"model parameters: {sum(p.numel() for p in model.parameters())}")

    training_args = Seq2SeqTrainingArguments(
        output_dir=args.output_dir, evaluation_strategy="steps", eval_steps=args.eval_steps, save_strategy="no",
        num_train_epochs=args.epochs, per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size, learning_rate=args.lr, logging_steps=1,
        predict_with_generate=True, generation_max_length=CONFIG["target_len"], report_to=[], seed=args.seed)
    trainer = Seq2SeqTrainer(model=model, args=training_args, train_dataset=train_ds, eval_dataset=eval_ds,
                             tokenizer=tokenizer, data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
                             compute_metrics=make_metrics(tokenizer))
    trainer.train()
    metrics = trainer.evaluate()
    print({k: round(v, 4) for k, v in metrics.items() if isinstance(v, float)})


if __name__ == "__main__":
    main()
