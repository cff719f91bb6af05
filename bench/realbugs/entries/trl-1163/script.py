"""Instruction tuning with completion-only loss and sequence packing.

The long examples blow the memory budget at max_seq_length=4096 without packing, so packing is
on; the collator masks the instruction so only the response is learned. Small GPT-2 from a
config and a handful of instructions written in code stand in for the real ones.
"""
import argparse

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast, TrainingArguments
from trl import DataCollatorForCompletionOnlyLM, SFTTrainer

RESPONSE_TEMPLATE = "### Answer:"
ROWS = [
    ("list three colours", "red green blue"),
    ("name a fruit", "apple"),
    ("what is the opposite of hot", "cold"),
    ("count to three", "one two three"),
    ("name a planet", "mars"),
]


def get_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max_seq_length", type=int, default=64)
    ap.add_argument("--packing", action="store_true", default=True)
    ap.add_argument("--max_steps", type=int, default=2)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<unk>": 0, "<|endoftext|>": 1, "###": 2, "Question:": 3, "Answer:": 4}
    for q, a in ROWS:
        for w in (q + " " + a).split():
            vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>")
    tok.pad_token = tok.eos_token
    return tok


def formatting_prompts_func(batch):
    return [f"### Question: {q} {RESPONSE_TEMPLATE} {a}" for q, a in zip(batch["question"], batch["answer"])]


def main():
    args = get_args()
    tokenizer = build_tokenizer()
    dataset = Dataset.from_dict({"question": [q for q, _ in ROWS] * 8, "answer": [a for _, a in ROWS] * 8})
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=128))

    collator = DataCollatorForCompletionOnlyLM(RESPONSE_TEMPLATE, tokenizer=tokenizer, mlm=False,
                                               return_tensors="pt", pad_to_multiple_of=8)
    training_arguments = TrainingArguments(output_dir="sft-packed", per_device_train_batch_size=2,
                                           max_steps=args.max_steps, logging_steps=1, report_to=[])
    trainer = SFTTrainer(
        model,
        args=training_arguments,
        train_dataset=dataset,
        formatting_func=formatting_prompts_func,
        data_collator=collator,
        max_seq_length=args.max_seq_length,
        packing=args.packing,
        tokenizer=tokenizer,
    )
    trainer.train()


if __name__ == "__main__":
    main()
