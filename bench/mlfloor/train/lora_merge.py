"""LoRA adapter fine-tune of a tiny Llama, then merge into the base weights for export.

Training uses static loss scaling (as the fp16 recipe this was copied from did); after a few
steps the adapter is merged with safe_merge=True so that a broken adapter never reaches the
exported checkpoint.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import random
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

log = logging.getLogger("lora")

RECIPE = {
    "model": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=96, max_position_embeddings=64),
    "lora": dict(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"],
                 task_type="CAUSAL_LM"),
    "train": dict(steps=2, batch_size=2, seq_len=10, lr=1e-3, loss_scale=2.0 ** 128,
                  optimizer="sgd"),
}

OPTIMIZERS = {
    "sgd": lambda params, lr: torch.optim.SGD(params, lr=lr),
    "adamw": lambda params, lr: torch.optim.AdamW(params, lr=lr),
}


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--recipe", type=str, default=None, help="JSON file overriding RECIPE")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--export-dir", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def load_recipe(path):
    recipe = json.loads(json.dumps(RECIPE))
    if path:
        with open(path) as f:
            for section, values in json.load(f).items():
                recipe[section].update(values)
    return recipe


def batches(n_steps, batch_size, seq_len, vocab, seed):
    rng = random.Random(seed)
    for _ in range(n_steps):
        yield torch.tensor([[rng.randrange(1, vocab) for _ in range(seq_len)] for _ in range(batch_size)])


def build_peft_model(recipe, seed):
    torch.manual_seed(seed)
    base = LlamaForCausalLM(LlamaConfig(**recipe["model"]))
    model = get_peft_model(base, LoraConfig(**recipe["lora"]))
    trainable, total = model.get_nb_trainable_parameters()
    log.info("trainable %d / %d params", trainable, total)
    return model


def train(model, recipe, seed):
    t = recipe["train"]
    opt = OPTIMIZERS[t["optimizer"]]([p for p in model.parameters() if p.requires_grad], t["lr"])
    model.train()
    for step, ids in enumerate(batches(t["steps"], t["batch_size"], t["seq_len"],
                                       recipe["model"]["vocab_size"], seed)):
        loss = model(input_ids=ids, labels=ids).loss
        (loss * t["loss_scale"]).backward()
        for p in model.parameters():
            if p.grad is not None:
                p.grad.div_(t["loss_scale"])
        opt.step()
        opt.zero_grad()
        log.info("step %d loss %.4f", step, loss.item())


def export(model, out_dir):
    merged = model.merge_and_unload(safe_merge=True)
    merged.save_pretrained(out_dir)
    log.info("merged model written to %s", out_dir)
    return merged


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = parse_args()
    recipe = load_recipe(args.recipe)
    if args.steps is not None:
        recipe["train"]["steps"] = args.steps
    model = build_peft_model(recipe, args.seed)
    train(model, recipe, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        export(model, args.export_dir or tmp)


if __name__ == "__main__":
    main()
