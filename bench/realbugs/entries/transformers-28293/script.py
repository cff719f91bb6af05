"""Fine-tune a small mT5 on a toy "spell the number" task and export it with the Trainer.

The starting weights come from an export in kernel layout (input dim first, as the original
framework stores dense kernels); `load_kernels` transposes them back and writes them into a model
built from the same config. A tiny mT5 built from a config stands in for the real export, and
the training pairs are generated in code.
"""
import argparse
import logging
import os
import random

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (DataCollatorForSeq2Seq, MT5Config, MT5ForConditionalGeneration,
                          PreTrainedTokenizerFast, Seq2SeqTrainer, Seq2SeqTrainingArguments)

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("spell-numbers")

UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
CONFIG = {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_decoder_layers": 2, "num_heads": 4,
          "relative_attention_num_buckets": 8, "dropout_rate": 0.0}


def parse_args():
    ap = argparse.ArgumentParser(description="spell digits with a small mT5")
    ap.add_argument("--workdir", default="mt5-spell")
    ap.add_argument("--n_train", type=int, default=48)
    ap.add_argument("--max_digits", type=int, default=4)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=3)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, "spell:": 3}
    for tok in list("0123456789") + UNITS:
        vocab.setdefault(tok, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>",
                                   unk_token="<unk>", model_input_names=["input_ids", "attention_mask"])


def make_pairs(rng, n, max_digits):
    pairs = []
    for _ in range(n):
        digits = [rng.choice("0123456789") for _ in range(rng.randint(1, max_digits))]
        pairs.append(("spell: " + " ".join(digits), " ".join(UNITS[int(d)] for d in digits)))
    return pairs


def encode(tokenizer, pairs):
    rows = []
    for src, tgt in pairs:
        ids = tokenizer(src)["input_ids"] + [tokenizer.eos_token_id]
        labels = tokenizer(tgt)["input_ids"] + [tokenizer.eos_token_id]
        rows.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels})
    return rows


def export_kernels(model):
    """What the upstream export gives us: every dense weight as a numpy kernel of shape (in, out)."""
    return {k: (v.t().numpy().copy() if is_kernel(k, v) else v.numpy().copy()) for k, v in model.state_dict().items()}


def is_kernel(name, value):
    return value.ndim == 2 and "embed" not in name and "shared" not in name


def load_kernels(model, kernels):
    """Kernel layout -> torch layout, written into the model's parameters in place of its init."""
    params = dict(model.named_parameters())
    loaded = 0
    for name, arr in kernels.items():
        if name not in params:
            continue
        if is_kernel(name, arr):
            arr = np.transpose(arr)
        params[name].data = torch.from_numpy(arr.astype(np.float32))
        loaded += 1
    log.info("loaded %d/%d tensors from the export", loaded, len(params))
    return model


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    tokenizer = build_tokenizer()

    config = MT5Config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                       eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.pad_token_id,
                       **CONFIG)
    kernels = export_kernels(MT5ForConditionalGeneration(config))
    model = load_kernels(MT5ForConditionalGeneration(config), kernels)
    log.info("loaded %.2fK parameters", model.num_parameters() / 1e3)

    train_ds = encode(tokenizer, make_pairs(rng, args.n_train, args.max_digits))
    eval_ds = encode(tokenizer, make_pairs(rng, 12, args.max_digits))
    training_args = Seq2SeqTrainingArguments(
        output_dir=os.path.join(args.workdir, "run"), num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=args.batch_size,
        learning_rate=args.lr, evaluation_strategy="epoch", save_strategy="no", logging_steps=2,
        report_to=[], seed=args.seed, predict_with_generate=False)
    trainer = Seq2SeqTrainer(model=model, args=training_args, train_dataset=train_ds, eval_dataset=eval_ds,
                             tokenizer=tokenizer, data_collator=DataCollatorForSeq2Seq(tokenizer, model=model))
    result = trainer.train()
    log.info("train loss %.4f", result.training_loss)
    log.info("eval: %s", trainer.evaluate())

    final_dir = os.path.join(args.workdir, "final")
    trainer.save_model(final_dir)  # also writes the tokenizer
    log.info("saved to %s", final_dir)
    sample = tokenizer("spell: 4 0 7", return_tensors="pt")
    out = model.generate(**sample, max_new_tokens=8)
    log.info("spell: 4 0 7 -> %s", tokenizer.decode(out[0], skip_special_tokens=True))


if __name__ == "__main__":
    main()
