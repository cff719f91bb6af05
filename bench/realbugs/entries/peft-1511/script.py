"""LoRA fine-tuning of a small BERT intent classifier with the Trainer.

Utterances and intents are generated in code; the model is a tiny BERT built from a config and the
tokenizer a word-level fast tokenizer built from the utterances.
"""
import argparse
import random
import tempfile

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (BertConfig, BertForSequenceClassification, DataCollatorWithPadding,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments)
from peft import LoraConfig, get_peft_model

INTENTS = {
    "weather": ["will it rain {when}", "how warm is it {when}", "do i need an umbrella {when}"],
    "alarm": ["wake me up {when}", "set an alarm for {when}", "cancel my alarm {when}"],
    "music": ["play some jazz {when}", "put on my playlist {when}", "skip this song {when}"],
}
WHEN = ["today", "tomorrow", "tonight", "at seven", "this weekend"]


class IntentDataset(torch.utils.data.Dataset):
    def __init__(self, tokenizer, n, seed):
        rng = random.Random(seed)
        labels = sorted(INTENTS)
        self.rows = []
        for _ in range(n):
            label = rng.choice(labels)
            text = rng.choice(INTENTS[label]).format(when=rng.choice(WHEN))
            enc = tokenizer(text, truncation=True, max_length=16)
            enc["labels"] = labels.index(label)
            self.rows.append(enc)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def build_tokenizer():
    words = sorted({w for ts in INTENTS.values() for t in ts for w in t.replace("{when}", "").split()}
                   | {w for t in WHEN for w in t.split()})
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    vocab.update({w: i + 4 for i, w in enumerate(words)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def compute_metrics(eval_pred):
    logits, labels = eval_pred
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", default=None)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--lora_r", type=int, default=16)
    args = parser.parse_args()

    tokenizer = build_tokenizer()
    model = BertForSequenceClassification(BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, num_labels=len(INTENTS)))

    config = LoraConfig(
        r=args.lora_r,
        lora_alpha=16,
        target_modules=["query", "value"],
        lora_dropout=0.1,
        use_original_init=False,
        bias="none",
        modules_to_save=["classifier"],
    )
    model = get_peft_model(model, config)
    model.print_trainable_parameters()

    training_args = TrainingArguments(output_dir=args.output_dir or tempfile.mkdtemp(), num_train_epochs=args.epochs,
                                      learning_rate=args.lr, per_device_train_batch_size=8, report_to=[],
                                      use_cpu=True, logging_steps=5, save_strategy="no")
    trainer = Trainer(model=model, args=training_args, train_dataset=IntentDataset(tokenizer, 48, 0),
                      eval_dataset=IntentDataset(tokenizer, 16, 1), data_collator=DataCollatorWithPadding(tokenizer),
                      compute_metrics=compute_metrics)
    trainer.train()
    print(trainer.evaluate())


if __name__ == "__main__":
    main()
