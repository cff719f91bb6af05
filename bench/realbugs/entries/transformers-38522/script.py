"""Continue pre-training a small causal LM on synthetic shell-history lines with the Trainer.

The run is driven by one CONFIG dict shared with the masked-LM variant of this job; for the causal
variant masking is switched off (mlm=False) and the masking probability is left unset. A word-level
tokenizer is built in code and a tiny GPT-2 comes from a config, so nothing is downloaded.
"""
import argparse
import logging
import random
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (DataCollatorForLanguageModeling, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast,
                          Trainer, TrainingArguments)

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("shell-lm")

CONFIG = {
    "objective": "clm",          # "mlm" for the encoder variant of this job
    "mlm_probability": None,     # only meaningful for the masked objective
    "max_length": 16,
    "n_embd": 32,
    "n_layer": 2,
    "n_head": 2,
}
COMMANDS = ["git", "ls", "cd", "grep", "docker", "python", "make"]
ARGS = ["status", "-la", "src", "-rn", "build", "run", "test", "clean", "main.py", "logs"]


def make_lines(n, seed):
    rng = random.Random(seed)
    return [" ".join([rng.choice(COMMANDS)] + rng.sample(ARGS, rng.randint(1, 3))) for _ in range(n)]


def build_tokenizer(lines):
    vocab = {"<pad>": 0, "<unk>": 1, "<eos>": 2}
    for line in lines:
        for w in line.split():
            vocab.setdefault(w, len(vocab))
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")


class LineDataset(torch.utils.data.Dataset):
    def __init__(self, lines, tokenizer, max_length):
        self.items = [tokenizer(line + " <eos>", truncation=True, max_length=max_length) for line in lines]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return {"input_ids": self.items[i]["input_ids"], "attention_mask": self.items[i]["attention_mask"]}


def build_collator(tokenizer, cfg):
    masked = cfg["objective"] == "mlm"
    return DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm=masked, mlm_probability=cfg["mlm_probability"])


def build_model(tokenizer, cfg):
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=cfg["max_length"] * 2, n_embd=cfg["n_embd"],
                        n_layer=cfg["n_layer"], n_head=cfg["n_head"], pad_token_id=tokenizer.pad_token_id,
                        eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id)
    return GPT2LMHeadModel(config)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()

    lines = make_lines(args.lines, args.seed)
    tokenizer = build_tokenizer(lines)
    dataset = LineDataset(lines, tokenizer, CONFIG["max_length"])
    collator = build_collator(tokenizer, CONFIG)
    model = build_model(tokenizer, CONFIG)
    log.info("%d lines, vocab %d, %d parameters", len(dataset), len(tokenizer), model.num_parameters())

    training_args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="shell-lm-"), num_train_epochs=args.epochs,
                                      per_device_train_batch_size=args.batch_size, learning_rate=5e-3,
                                      logging_steps=2, save_strategy="no", report_to="none", use_cpu=True,
                                      seed=args.seed)
    trainer = Trainer(model=model, args=training_args, train_dataset=dataset, data_collator=collator)
    result = trainer.train()
    log.info("finished: loss %.3f over %d steps", result.training_loss, result.global_step)
    sample = tokenizer("git status", return_tensors="pt")
    out = model.generate(**sample, max_new_tokens=4, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    log.info("sample continuation: %s", tokenizer.decode(out[0]))


if __name__ == "__main__":
    main()
