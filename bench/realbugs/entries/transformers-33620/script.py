"""Fine-tune a small English -> Arabic-transliteration translation model with Seq2SeqTrainer.

A dry run of the training recipe before the real checkpoint: the encoder-decoder is a tiny T5
built from a config, the tokenizer a word-level one built from the phrase pairs written below,
and training stops after a few steps.
"""
import argparse

import random

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (DataCollatorForSeq2Seq, GenerationConfig, PreTrainedTokenizerFast, Seq2SeqTrainer,
                          Seq2SeqTrainingArguments, T5Config, T5ForConditionalGeneration)

PAIRS = [
    ("good morning", "sabah al khair"), ("thank you", "shukran"), ("how are you", "kaifa haluk"),
    ("peace be upon you", "as salamu alaykum"), ("good night", "tusbih ala khair"), ("welcome", "ahlan wa sahlan"),
    ("see you later", "ila al liqa"), ("what is your name", "ma ismuk"), ("i am fine", "ana bikhair"),
    ("the book is new", "al kitab jadid"), ("the house is big", "al bait kabir"), ("where is the market", "ayna al suq"),
]


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output_dir", default="translate-en-ar")
    ap.add_argument("--max_steps", type=int, default=4)
    ap.add_argument("--batch_size", type=int, default=4)
    ap.add_argument("--learning_rate", type=float, default=3e-4)
    ap.add_argument("--max_length", type=int, default=16)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for src, tgt in PAIRS:
        for word in f"{src} {tgt}".split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="</s>", pad_token="<pad>",
                                   model_input_names=["input_ids", "attention_mask"])


def build_model(vocab_size):
    torch.manual_seed(0)
    config = T5Config(vocab_size=vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=4, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    return T5ForConditionalGeneration(config)


class PairDataset(torch.utils.data.Dataset):
    """Tokenised (source, target) pairs as the features DataCollatorForSeq2Seq pads."""

    def __init__(self, pairs, tokenizer, max_length):
        self.rows = []
        for src, tgt in pairs:
            inputs = tokenizer(src + " </s>", max_length=max_length, truncation=True)
            labels = tokenizer(tgt + " </s>", max_length=max_length, truncation=True)
            self.rows.append({**inputs, "labels": labels["input_ids"]})

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def split_pairs(pairs, test_fraction, seed):
    shuffled = list(pairs)
    random.Random(seed).shuffle(shuffled)
    n_test = max(1, int(len(shuffled) * test_fraction))
    return shuffled[n_test:], shuffled[:n_test]


def compute_metrics_factory(tokenizer):
    def compute_metrics(eval_pred):
        preds, labels = eval_pred
        labels = np.where(labels != -100, labels, tokenizer.pad_token_id)
        decoded = tokenizer.batch_decode(preds, skip_special_tokens=True)
        refs = tokenizer.batch_decode(labels, skip_special_tokens=True)
        exact = sum(p.strip() == r.strip() for p, r in zip(decoded, refs)) / len(refs)
        return {"exact_match": exact}
    return compute_metrics


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    model = build_model(len(tokenizer))
    model.generation_config = GenerationConfig(max_new_tokens=args.max_length, decoder_start_token_id=0,
                                               eos_token_id=1, pad_token_id=0)

    train_pairs, test_pairs = split_pairs(PAIRS, 0.25, seed=0)
    train_set = PairDataset(train_pairs, tokenizer, args.max_length)
    eval_set = PairDataset(test_pairs, tokenizer, args.max_length)

    training_args = Seq2SeqTrainingArguments(
        output_dir=args.output_dir,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        max_steps=args.max_steps,
        eval_strategy="steps",
        eval_steps=2,
        predict_with_generate=True,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
    )
    trainer = Seq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=train_set,
        eval_dataset=eval_set,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        tokenizer=tokenizer,
        compute_metrics=compute_metrics_factory(tokenizer),
    )
    trainer.train()
    print(trainer.evaluate())


if __name__ == "__main__":
    main()
