"""Attach a LoRA adapter to Gemma 4: the short example behind the README's first command.

    reprobot reduce examples/cpu_gemma4_lora/quick_lora.py

A script of the shape people post first: a config dict, a model preset, a helper per step and
a few lines of bookkeeping around one failing call. The model is a tiny Gemma 4 built from a
config (no download, about a second on a laptop CPU). It fails the way broad-target Gemma 4
LoRA runs fail in the forum thread behind reprobot (PEFT issue #3129):

    ValueError: Target module Gemma4ClippableLinear(...) is not supported. ...

`train_lora.py` next to it is the long form (argparse, registries, a trainer and its loop).
"""
import json
import logging
import os
import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoConfig, Gemma4ForConditionalGeneration

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("quick_lora")

# A tiny Gemma 4 (2 text layers, 1 vision layer) saved from a config: it stands in for the
# Hub checkpoint a real run names, and builds in about a second.
MODEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny-gemma4")

RUN = {
    "output_dir": os.environ.get("OUTPUT_DIR", "runs/quick-lora"),
    "seed": 1234,
    "rank": 8,
    "alpha": 16,
    "targets": ["q_proj", "k_proj", "v_proj", "o_proj"],
}


def build_model(model_dir):
    config = AutoConfig.from_pretrained(model_dir)
    model = Gemma4ForConditionalGeneration(config)
    log.info("built %s with %d parameters", config.model_type, sum(p.numel() for p in model.parameters()))
    return model


def lora_config(run):
    return LoraConfig(r=run["rank"], lora_alpha=run["alpha"], lora_dropout=0.05,
                      target_modules=run["targets"], task_type="CAUSAL_LM")


def main():
    started = time.time()
    torch.manual_seed(RUN["seed"])
    os.makedirs(RUN["output_dir"], exist_ok=True)
    model = build_model(MODEL_DIR)
    model = get_peft_model(model, lora_config(RUN))
    model.print_trainable_parameters()
    with open(os.path.join(RUN["output_dir"], "run.json"), "w") as f:
        json.dump({**RUN, "seconds": round(time.time() - started, 1)}, f)
    log.info("adapter attached in %.1fs", time.time() - started)


if __name__ == "__main__":
    main()
