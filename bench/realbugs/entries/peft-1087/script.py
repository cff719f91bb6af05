"""Evaluate our archived financial-sentiment LoRA adapter on a seq2seq model.

The adapter was trained in an early experiment and kept as its adapter folder (config and
weights); this script loads the config to find the base model, puts the adapter on it and
generates a label for a few headlines. Here a tiny T5 built from a config stands in for the base
checkpoint, and the archived folder is written out from the values we kept, so the run is offline.
"""
import argparse
import json
import os

import torch
from peft import PeftConfig, PeftModel
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

HEADLINES = [
    "profits rose sharply in the third quarter",
    "the company cut its forecast after weak sales",
    "shares were flat in early trading",
    "the bank reported record losses",
]
LABELS = ["positive", "negative", "neutral"]

# adapter_config.json of the archived adapter, as it was saved at the time
ARCHIVED_CONFIG = {
    "base_model_name_or_path": "google/flan-t5-large",
    "bias": "none",
    "enable_lora": None,
    "fan_in_fan_out": False,
    "inference_mode": True,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "merge_weights": False,
    "modules_to_save": None,
    "peft_type": "LORA",
    "r": 4,
    "target_modules": ["q", "v"],
    "task_type": "SEQ_2_SEQ_LM",
}


def parse_args():
    ap = argparse.ArgumentParser(description="evaluate an archived LoRA adapter")
    ap.add_argument("--adapter_dir", default="archived-adapter")
    ap.add_argument("--max_new_tokens", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for text in HEADLINES + LABELS + ["classify", "sentiment:"]:
        for word in text.split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="</s>", model_input_names=["input_ids", "attention_mask"])


def build_base_model(vocab_size, seed):
    # stands in for AutoModelForSeq2SeqLM.from_pretrained(config.base_model_name_or_path)
    torch.manual_seed(seed)
    config = T5Config(vocab_size=vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=4, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    return T5ForConditionalGeneration(config)


def write_archived_adapter(folder, model, config):
    """The adapter folder as we archived it: its config and the LoRA matrices of q and v."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    state, r = {}, config["r"]
    for name, module in model.named_modules():
        if name.split(".")[-1] in config["target_modules"] and isinstance(module, torch.nn.Linear):
            prefix = f"base_model.model.{name}"
            state[f"{prefix}.lora_A.weight"] = torch.randn(r, module.in_features) * 0.01
            state[f"{prefix}.lora_B.weight"] = torch.zeros(module.out_features, r)
    torch.save(state, os.path.join(folder, "adapter_model.bin"))
    return len(state)


def classify(model, tokenizer, headlines, max_new_tokens):
    prompts = [f"classify sentiment: {h}" for h in headlines]
    batch = tokenizer(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=max_new_tokens)
    return tokenizer.batch_decode(out, skip_special_tokens=True)


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    base = build_base_model(len(tokenizer), args.seed)
    if not os.path.isdir(args.adapter_dir):
        n = write_archived_adapter(args.adapter_dir, base, ARCHIVED_CONFIG)
        print(f"restored archived adapter ({n} tensors) to {args.adapter_dir}")

    config = PeftConfig.from_pretrained(args.adapter_dir)
    print(f"adapter for {config.base_model_name_or_path}, task {config.task_type}")
    model = PeftModel.from_pretrained(base, args.adapter_dir)
    model.eval()

    for headline, label in zip(HEADLINES, classify(model, tokenizer, HEADLINES, args.max_new_tokens)):
        print(f"{label!r:>12}  {headline}")


if __name__ == "__main__":
    main()
