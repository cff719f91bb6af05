"""SFT of a small code assistant on instruction/response pairs, keeping our metadata columns
(source, license) in the dataset so the eval callback can group results by source.

Worked with trl 0.7.7; the dataset and model are built in code (small GPT-2 from a config).
"""
import argparse

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast, TrainingArguments
from trl import SFTTrainer

EXAMPLES = [
    ("reverse a list", "use slicing with a step of minus one", "docs", "mit"),
    ("read a file", "open it with a context manager", "forum", "cc-by"),
    ("sort a dict by value", "use sorted with a key function", "docs", "mit"),
    ("join strings", "use the join method of the separator", "forum", "cc-by"),
    ("count words", "split the text and use a counter", "docs", "mit"),
    ("remove duplicates", "convert the list to a set", "forum", "cc-by"),
]


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max_seq_length", type=int, default=32)
    ap.add_argument("--max_steps", type=int, default=2)
    ap.add_argument("--output_dir", default="sft-code")
    return ap.parse_args()


def tokenizer_for(rows):
    vocab = {"<unk>": 0, "<|endoftext|>": 1, "###": 2, "instruction:": 3, "response:": 4}
    for ins, out, _, _ in rows:
        for w in (ins + " " + out).split():
            vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>")
    tok.pad_token = tok.eos_token
    return tok


def formatting_func(batch):
    return [f"### instruction: {i} ### response: {o}" for i, o in zip(batch["instruction"], batch["output"])]


def main():
    args = cli()
    rows = EXAMPLES * 4
    dataset = Dataset.from_dict({"instruction": [r[0] for r in rows], "output": [r[1] for r in rows],
                                 "source": [r[2] for r in rows], "license": [r[3] for r in rows]})
    tokenizer = tokenizer_for(EXAMPLES)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=64))

    training_args = TrainingArguments(output_dir=args.output_dir, per_device_train_batch_size=4,
                                      max_steps=args.max_steps, logging_steps=1, report_to=[],
                                      remove_unused_columns=False)
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=dataset, tokenizer=tokenizer,
                         formatting_func=formatting_func, max_seq_length=args.max_seq_length, packing=False)
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
