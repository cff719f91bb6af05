"""LoRA supervised fine-tuning of a small Phi-3 style model on recipe instructions.

Mirrors the way we launch `trl sft` from our job runner: the knobs live in a flat config dict
(the same names as the CLI flags), we build ScriptArguments / SFTConfig / ModelConfig from it and
let TRL turn the ModelConfig into a PEFT config. The checkpoint is replaced by a tiny Phi-3 built
from a config and the dataset is generated in code so the run is offline.
"""
import argparse
import random

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import Phi3Config, Phi3ForCausalLM, PreTrainedTokenizerFast
from trl import ModelConfig, SFTConfig, SFTTrainer, get_peft_config

RUN = {
    # model
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    # peft flags, as passed on the command line
    "use_peft": True,
    "lora_r": 16,
    "lora_alpha": 16,
    "lora_dropout": 0.05,
    # training flags
    "learning_rate": 2e-4,
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 2,
    "max_steps": 4,
    "max_length": 64,
    "logging_steps": 1,
}

DISHES = ["soup", "salad", "omelette", "curry", "pasta", "stew"]
STEPS = ["chop the onions", "boil the water", "heat the pan", "add the salt", "stir for five minutes",
         "let it rest", "serve warm"]


def make_rows(rng, n):
    rows = []
    for _ in range(n):
        dish = rng.choice(DISHES)
        steps = rng.sample(STEPS, 3)
        rows.append({"text": f"<s> how do i make {dish} ? first {steps[0]} then {steps[1]} and {steps[2]} </s>"})
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


def build_model(tokenizer, run):
    config = Phi3Config(vocab_size=len(tokenizer), hidden_size=run["hidden_size"],
                        intermediate_size=run["intermediate_size"], num_hidden_layers=run["num_hidden_layers"],
                        num_attention_heads=run["num_attention_heads"], num_key_value_heads=run["num_attention_heads"],
                        max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    return Phi3ForCausalLM(config)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=48)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--output_dir", default="phi3-recipes-lora")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)

    rows = make_rows(rng, args.samples)
    tokenizer = build_tokenizer(rows)
    train_ds = Dataset.from_list(rows)
    model = build_model(tokenizer, RUN)
    print(f"{len(train_ds)} rows, vocab {len(tokenizer)}, model_type {model.config.model_type}")

    model_args = ModelConfig(use_peft=RUN["use_peft"], lora_r=RUN["lora_r"], lora_alpha=RUN["lora_alpha"],
                             lora_dropout=RUN["lora_dropout"], lora_task_type="CAUSAL_LM")
    training_args = SFTConfig(output_dir=args.output_dir, learning_rate=RUN["learning_rate"],
                              per_device_train_batch_size=RUN["per_device_train_batch_size"],
                              gradient_accumulation_steps=RUN["gradient_accumulation_steps"],
                              max_steps=RUN["max_steps"], max_length=RUN["max_length"],
                              logging_steps=RUN["logging_steps"], dataset_text_field="text",
                              save_strategy="no", report_to="none", bf16=False, seed=args.seed)
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=train_ds,
                         processing_class=tokenizer, peft_config=get_peft_config(model_args))
    trainer.model.print_trainable_parameters()
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
