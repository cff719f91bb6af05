"""LoRA fine-tuning of a small chat model on data we tokenise ourselves.

Our data pipeline already produces token ids, attention masks and labels (the prompt part of
each example is masked with -100 in the labels), so the trainer should take the examples as they
are. A tiny Qwen2 built from a config stands in for the real checkpoint; a few question/answer
pairs written in code stand in for the corpus.
"""
import argparse
import os

import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import SFTConfig, SFTTrainer

EXAMPLES = [
    ("what is two plus two", "two plus two is four"),
    ("name a large animal", "an elephant is a large animal"),
    ("what colour is the sky", "the sky is blue"),
    ("where do fish live", "fish live in water"),
    ("what do cows eat", "cows eat grass"),
    ("how many days in a week", "a week has seven days"),
    ("what is frozen water", "frozen water is ice"),
    ("when do owls hunt", "owls hunt at night"),
]
IGNORE = -100


def parse_args():
    ap = argparse.ArgumentParser(description="SFT with LoRA on pre-tokenised data")
    ap.add_argument("--output_dir", default="sft-pretokenised")
    ap.add_argument("--seq_len", type=int, default=16)
    ap.add_argument("--lora_r", type=int, default=4)
    ap.add_argument("--batch_size", type=int, default=2)
    ap.add_argument("--max_steps", type=int, default=2)
    ap.add_argument("--learning_rate", type=float, default=2e-4)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<unk>": 0, "<|endoftext|>": 1, "<|pad|>": 2, "<|user|>": 3, "<|assistant|>": 4}
    for question, answer in EXAMPLES:
        for word in f"{question} {answer}".split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>",
                                   pad_token="<|pad|>", model_input_names=["input_ids", "attention_mask"])


def encode_example(tokenizer, question, answer, seq_len):
    prompt_ids = tokenizer(f"<|user|> {question} <|assistant|>")["input_ids"]
    answer_ids = tokenizer(answer)["input_ids"] + [tokenizer.eos_token_id]
    ids = (prompt_ids + answer_ids)[:seq_len]
    labels = ([IGNORE] * len(prompt_ids) + answer_ids)[:seq_len]
    pad = seq_len - len(ids)
    return {
        "input_ids": torch.tensor(ids + [tokenizer.pad_token_id] * pad, dtype=torch.int32),
        "attention_mask": torch.tensor([1] * len(ids) + [0] * pad, dtype=torch.int8),
        "labels": torch.tensor(labels + [IGNORE] * pad, dtype=torch.int32),
    }


def build_dataset(tokenizer, seq_len):
    rows = [encode_example(tokenizer, q, a, seq_len) for q, a in EXAMPLES]
    return Dataset.from_list(rows)


def build_model(vocab_size, seed):
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         eos_token_id=1, pad_token_id=2, tie_word_embeddings=True, use_cache=False)
    return Qwen2ForCausalLM(config)


def add_lora(model, r):
    config = LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=0.0, target_modules=["q_proj", "v_proj"],
                        task_type="CAUSAL_LM")
    model = get_peft_model(model, config)
    model.print_trainable_parameters()
    return model


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    dataset = build_dataset(tokenizer, args.seq_len)
    print(f"dataset={dataset}")
    model = add_lora(build_model(len(tokenizer), args.seed), args.lora_r)

    training_args = SFTConfig(
        output_dir=args.output_dir,
        per_device_train_batch_size=args.batch_size,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        bf16=False,
    )
    trainer = SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    result = trainer.train()
    print(f"train loss {result.training_loss:.4f} after {result.global_step} steps")
    model.save_pretrained(os.path.join(args.output_dir, "adapter"))


if __name__ == "__main__":
    main()
