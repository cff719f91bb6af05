"""Preference tuning (DPO) of a small chat model on hand-written preference pairs.

A first pass before the real run on the cluster: a tiny Qwen2 built from a config, a few pairs
written in code, a couple of optimisation steps with logging every step so the reward margins
show up in the console from the start.
"""
import argparse
import json
import os

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import DPOConfig, DPOTrainer

PAIRS = [
    ("how do i boil an egg", "put the egg in boiling water for nine minutes", "eggs are round"),
    ("what is the capital of france", "the capital of france is paris", "i like trains"),
    ("give me a synonym for happy", "a synonym for happy is glad", "happy happy happy"),
    ("how many legs does a spider have", "a spider has eight legs", "spiders are scary"),
    ("name a primary colour", "red is a primary colour", "colours are nice"),
    ("what do bees make", "bees make honey", "bees are small"),
]


def parse_args():
    ap = argparse.ArgumentParser(description="DPO on a small model")
    ap.add_argument("--output_dir", default="dpo-smoke")
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--learning_rate", type=float, default=5e-5)
    ap.add_argument("--batch_size", type=int, default=2)
    ap.add_argument("--max_steps", type=int, default=3)
    ap.add_argument("--logging_steps", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<unk>": 0, "<|endoftext|>": 1, "<|pad|>": 2}
    for prompt, chosen, rejected in PAIRS:
        for word in f"{prompt} {chosen} {rejected}".split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>",
                                        pad_token="<|pad|>", model_input_names=["input_ids", "attention_mask"])
    return tokenizer


def build_model(vocab_size, seed):
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         eos_token_id=1, pad_token_id=2, tie_word_embeddings=True)
    return Qwen2ForCausalLM(config)


def build_dataset():
    rows = {"prompt": [], "chosen": [], "rejected": []}
    for prompt, chosen, rejected in PAIRS * 2:
        rows["prompt"].append(prompt)
        rows["chosen"].append(" " + chosen)
        rows["rejected"].append(" " + rejected)
    return Dataset.from_dict(rows)


def describe(dataset, tokenizer):
    lengths = [len(tokenizer(p + c)["input_ids"]) for p, c in zip(dataset["prompt"], dataset["chosen"])]
    print(f"{len(dataset)} pairs, longest chosen sequence {max(lengths)} tokens")


def save_summary(trainer, output_dir):
    os.makedirs(output_dir, exist_ok=True)
    history = [h for h in trainer.state.log_history if "loss" in h]
    with open(os.path.join(output_dir, "summary.json"), "w") as f:
        json.dump({"steps": trainer.state.global_step, "history": history}, f, indent=2)
    return history


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    model = build_model(len(tokenizer), args.seed)
    dataset = build_dataset()
    describe(dataset, tokenizer)

    training_args = DPOConfig(
        output_dir=args.output_dir,
        beta=args.beta,
        learning_rate=args.learning_rate,
        per_device_train_batch_size=args.batch_size,
        max_steps=args.max_steps,
        logging_steps=args.logging_steps,
        max_length=64,
        max_prompt_length=32,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        bf16=False,
    )
    trainer = DPOTrainer(
        model=model,
        ref_model=None,
        args=training_args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()

    history = save_summary(trainer, args.output_dir)
    for row in history:
        margin = row.get("rewards/margins")
        print(f"step {row.get('step')}: loss {row['loss']:.4f} margin {margin}")


if __name__ == "__main__":
    main()
