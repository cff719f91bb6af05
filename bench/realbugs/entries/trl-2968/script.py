"""Supervised fine-tuning with LoRA, adapted from the PEFT SFT example to a laptop-sized run.

Model, tokenizer and data are stand-ins: a small Llama built from a config, a word-level
tokenizer over the sample dialogues below, and a handful of dialogues split into train/eval.
The LoRA settings mirror the ones used for the 8B run.
"""
import argparse
import os
import random

import torch
from datasets import Dataset
from peft import LoraConfig
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, set_seed
from trl import SFTConfig, SFTTrainer

DIALOGUES = [
    ("what is the boiling point of water", "water boils at one hundred degrees at sea level"),
    ("name three primary colours", "red yellow and blue are the primary colours"),
    ("how many days are in a week", "a week has seven days"),
    ("what do plants need to grow", "plants need light water and air to grow"),
    ("who wrote hamlet", "hamlet was written by shakespeare"),
    ("what is the largest planet", "jupiter is the largest planet"),
    ("how do you say hello in french", "hello in french is bonjour"),
    ("what is two plus two", "two plus two is four"),
]


def parse_args():
    ap = argparse.ArgumentParser(description="SFT + LoRA")
    ap.add_argument("--output_dir", default="sft-lora")
    ap.add_argument("--max_seq_length", type=int, default=64)
    ap.add_argument("--lora_r", type=int, default=8)
    ap.add_argument("--lora_alpha", type=int, default=16)
    ap.add_argument("--lora_dropout", type=float, default=0.1)
    ap.add_argument("--lora_target_modules", default="q_proj,k_proj,v_proj,o_proj,down_proj,up_proj,gate_proj")
    ap.add_argument("--learning_rate", type=float, default=1e-4)
    ap.add_argument("--max_steps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=100)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3, "user:": 4, "assistant:": 5}
    for question, answer in DIALOGUES:
        for word in f"{question} {answer}".split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", model_input_names=["input_ids", "attention_mask"])


def create_datasets(seed):
    rows = [f"user: {q} assistant: {a}" for q, a in DIALOGUES]
    random.Random(seed).shuffle(rows)
    split = int(len(rows) * 0.75)
    train_data = Dataset.from_dict({"text": rows[:split] * 4})
    eval_data = Dataset.from_dict({"text": rows[split:]})
    print(f"Size of the train set: {len(train_data)}. Size of the validation set: {len(eval_data)}")
    return train_data, eval_data


def create_and_prepare_model(args, tokenizer):
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         bos_token_id=1, eos_token_id=2, pad_token_id=3)
    model = LlamaForCausalLM(config)
    peft_config = LoraConfig(
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        r=args.lora_r,
        bias="none",
        task_type="CAUSAL_LM",
        target_modules=args.lora_target_modules.split(","),
    )
    return model, peft_config


def main():
    args = parse_args()
    set_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    tokenizer = build_tokenizer()
    model, peft_config = create_and_prepare_model(args, tokenizer)
    model.config.use_cache = False
    train_dataset, eval_dataset = create_datasets(args.seed)

    training_args = SFTConfig(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        per_device_train_batch_size=2,
        per_device_eval_batch_size=2,
        learning_rate=args.learning_rate,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="no",
        report_to="none",
        bf16=False,
        dataset_text_field="text",
        packing=False,
    )

    trainer = SFTTrainer(
        model=model,
        tokenizer=tokenizer,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        peft_config=peft_config,
    )
    trainer.accelerator.print(f"{trainer.model}")
    if hasattr(trainer.model, "print_trainable_parameters"):
        trainer.model.print_trainable_parameters()

    trainer.train()
    with torch.no_grad():
        metrics = trainer.evaluate()
    print(metrics)
    trainer.save_model()


if __name__ == "__main__":
    main()
