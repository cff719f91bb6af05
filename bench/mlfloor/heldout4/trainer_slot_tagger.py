"""Slot tagger for the smart-home assistant (BIO tags over words), trained with the HF Trainer.

The utterances come from our annotation export (inlined here); we keep our own torch Dataset so
the same class serves the offline evaluation scripts. The tokenizer is word level: the
vocabulary is closed, so no subword alignment is needed and labels map 1:1 to tokens.

    python trainer_slot_tagger.py --out slot_tagger --epochs 1 --batch-size 4
"""
import argparse
import logging
import os

import numpy as np
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from torch.utils.data import Dataset
from transformers import (BertConfig, BertForTokenClassification, DataCollatorWithPadding,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments)

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
logger = logging.getLogger("slot-tagger")

LABELS = ["O", "B-device", "I-device", "B-room", "I-room", "B-value", "I-value"]

ANNOTATED = [
    ("turn on the kitchen lights", "O O O B-room B-device"),
    ("set the living room thermostat to twenty one", "O O B-room I-room B-device O B-value I-value"),
    ("dim the bedroom lamp", "O O B-room B-device"),
    ("switch off the tv", "O O O B-device"),
    ("open the garage door", "O O B-room B-device"),
    ("set the oven to two hundred degrees", "O O B-device O B-value I-value I-value"),
    ("turn the bathroom fan on", "O O B-room B-device O"),
    ("lower the blinds in the dining room", "O O B-device O O B-room I-room"),
    ("play music", "O B-device"),
    ("turn off all the lights in the guest bedroom", "O O O O B-device O O B-room I-room"),
    ("lock the front door", "O O B-device I-device"),
    ("set the heating to nineteen", "O O B-device O B-value"),
]

MODEL_ARGS = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 64, "max_position_embeddings": 32}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="slot_tagger")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--seed", type=int, default=42)
    return p.parse_args()


def build_tokenizer(sentences):
    words = sorted({w for s in sentences for w in s.split()})
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + words)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


class SlotDataset(Dataset):
    """One utterance per item: word ids, mask and one label id per word."""

    def __init__(self, rows, tokenizer, label2id, max_length=32):
        self.items = []
        for text, tags in rows:
            words, tag_list = text.split(), tags.split()
            if len(words) != len(tag_list):
                raise ValueError(f"tag count mismatch in {text!r}")
            enc = tokenizer(words, is_split_into_words=True, truncation=True,
                            max_length=max_length)
            self.items.append({"input_ids": enc["input_ids"],
                               "attention_mask": enc["attention_mask"],
                               "labels": [label2id[t] for t in tag_list][:max_length]})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def compute_metrics(eval_pred):
    logits, labels = eval_pred
    preds = np.argmax(logits, axis=-1)
    mask = labels != -100
    return {"token_accuracy": float((preds[mask] == labels[mask]).mean())}


def main():
    args = parse_args()
    label2id = {l: i for i, l in enumerate(LABELS)}
    id2label = {i: l for l, i in label2id.items()}
    tokenizer = build_tokenizer([t for t, _ in ANNOTATED])

    split = int(len(ANNOTATED) * 0.75)
    train_ds = SlotDataset(ANNOTATED[:split], tokenizer, label2id)
    eval_ds = SlotDataset(ANNOTATED[split:], tokenizer, label2id)
    logger.info("train %d / eval %d utterances, vocab %d", len(train_ds), len(eval_ds),
                len(tokenizer))

    torch.manual_seed(args.seed)
    config = BertConfig(vocab_size=len(tokenizer), num_labels=len(LABELS), id2label=id2label,
                        label2id=label2id, pad_token_id=tokenizer.pad_token_id, **MODEL_ARGS)
    model = BertForTokenClassification(config)

    training_args = TrainingArguments(
        output_dir=args.out,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size,
        learning_rate=args.lr,
        eval_strategy="epoch",
        save_strategy="no",
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        seed=args.seed,
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics,
    )
    result = trainer.train()
    logger.info("train loss %.4f", result.training_loss)
    logger.info("eval %s", trainer.evaluate())
    trainer.save_model(os.path.join(args.out, "final"))
    tokenizer.save_pretrained(os.path.join(args.out, "final"))


if __name__ == "__main__":
    main()
