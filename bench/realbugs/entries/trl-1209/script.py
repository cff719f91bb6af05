"""Supervised fine-tuning of a small causal LM on support-desk replies with TRL's SFTTrainer.

Kaggle-style notebook exported to a script: the instruction/response pairs are generated in code
(stand-ins for the ticket export), a tiny Llama is built from a config in place of the checkpoint,
and a word-level tokenizer is built from the corpus vocabulary. Trains with LoRA-free full
fine-tuning for a handful of steps and prints a sample completion at the end.
"""
import argparse
import random

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, TrainingArguments
from trl import SFTTrainer

PRODUCTS = ["router", "printer", "laptop", "headset", "monitor"]
PROBLEMS = ["does not turn on", "keeps disconnecting", "is very slow", "makes a noise", "shows an error"]
FIXES = ["restart it and hold the reset button", "update the firmware from the settings page",
         "replace the cable and try another port", "run the built in diagnostics", "contact the warranty desk"]

CONFIG = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_seq_length": 48,
}


def parse_args():
    ap = argparse.ArgumentParser(description="SFT on support-desk replies")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--max_steps", type=int, default=6)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--output_dir", default="support-sft")
    return ap.parse_args()


def make_tickets(rng, n):
    rows = []
    for _ in range(n):
        product, problem = rng.choice(PRODUCTS), rng.choice(PROBLEMS)
        fix = FIXES[(PRODUCTS.index(product) + PROBLEMS.index(problem)) % len(FIXES)]
        rows.append({"text": f"### question : my {product} {problem} ### answer : please {fix} </s>"})
    return rows


def build_tokenizer(rows):
    vocab = {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3}
    for row in rows:
        for word in row["text"].split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                   bos_token="<s>", eos_token="</s>",
                                   model_input_names=["input_ids", "attention_mask"])


def build_model(tokenizer):
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=CONFIG["hidden_size"],
                         intermediate_size=CONFIG["intermediate_size"],
                         num_hidden_layers=CONFIG["num_hidden_layers"],
                         num_attention_heads=CONFIG["num_attention_heads"],
                         max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    return LlamaForCausalLM(config)


@torch.no_grad()
def sample_reply(model, tokenizer, prompt, max_new_tokens=8):
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False,
                         pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0][ids.shape[1]:], skip_special_tokens=True)


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    rows = make_tickets(rng, args.samples)
    tokenizer = build_tokenizer(rows)
    train_ds = Dataset.from_list(rows)
    model = build_model(tokenizer)
    print(f"{len(train_ds)} tickets, vocab {len(tokenizer)}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")

    training_args = TrainingArguments(output_dir=args.output_dir, max_steps=args.max_steps,
                                      per_device_train_batch_size=args.batch_size, learning_rate=args.lr,
                                      logging_steps=2, save_strategy="no", report_to=[], seed=args.seed)
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=train_ds, tokenizer=tokenizer,
                         dataset_text_field="text", max_seq_length=CONFIG["max_seq_length"], packing=False)
    trainer.train()
    print("sample:", sample_reply(model, tokenizer, "### question : my router keeps disconnecting ### answer :"))


if __name__ == "__main__":
    main()
