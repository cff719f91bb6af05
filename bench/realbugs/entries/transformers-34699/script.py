"""Token classification fine-tune (NER) on a small in-house tag set.

Trains a small BERT-style tagger on sentences we label in code, evaluates seqeval-style
accuracy per token, and writes the model to --output_dir.
"""
import argparse
import random

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (BertConfig, BertForTokenClassification, DataCollatorForTokenClassification,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments)

LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
PEOPLE = ["alice smith", "bob jones", "carla diaz", "dmitri ivanov"]
ORGS = ["acme corp", "globex", "initech", "umbrella labs"]
PLACES = ["paris", "new york", "lagos", "osaka"]


def make_sentence(rng):
    person, org, place = rng.choice(PEOPLE), rng.choice(ORGS), rng.choice(PLACES)
    words, tags = [], []
    for chunk, kind in ((person, "PER"), (["joined"], None), (org, "ORG"), (["in"], None), (place, "LOC")):
        parts = chunk.split() if isinstance(chunk, str) else chunk
        for i, w in enumerate(parts):
            words.append(w)
            tags.append("O" if kind is None else ("B-" if i == 0 else "I-") + kind)
    return words, tags


def build_tokenizer(sentences):
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for words, _ in sentences:
        for w in words:
            vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


class NerDataset(torch.utils.data.Dataset):
    def __init__(self, sentences, tokenizer, label2id):
        self.items = []
        for words, tags in sentences:
            enc = tokenizer(words, is_split_into_words=True, truncation=True, max_length=32)
            labels = [-100 if wid is None else label2id[tags[wid]] for wid in enc.word_ids()]
            self.items.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                               "labels": labels})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def compute_metrics(pred):
    logits, labels = pred
    preds = np.argmax(logits, axis=-1)
    mask = labels != -100
    return {"token_accuracy": float((preds[mask] == labels[mask]).mean())}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", default="ner-out")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    train = [make_sentence(rng) for _ in range(64)]
    dev = [make_sentence(rng) for _ in range(16)]
    label2id = {l: i for i, l in enumerate(LABELS)}
    tokenizer = build_tokenizer(train + dev)

    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, num_labels=len(LABELS),
                        id2label=dict(enumerate(LABELS)), label2id=label2id)
    model = BertForTokenClassification(config)

    training_args = TrainingArguments(output_dir=args.output_dir, num_train_epochs=args.epochs,
                                      per_device_train_batch_size=args.batch_size,
                                      per_device_eval_batch_size=args.batch_size,
                                      evaluation_strategy="epoch", logging_steps=5,
                                      report_to=[], seed=args.seed)
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=NerDataset(train, tokenizer, label2id),
        eval_dataset=NerDataset(dev, tokenizer, label2id),
        tokenizer=tokenizer,
        data_collator=DataCollatorForTokenClassification(tokenizer),
        compute_metrics=compute_metrics,
    )
    trainer.train()
    print(trainer.evaluate())
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
