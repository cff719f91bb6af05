"""A LoRA run configured by a JSON file whose target modules the model does not have."""
import json
import os
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))

with open(os.path.join(HERE, "train_config.json")) as f:
    settings = json.load(f)

model = LlamaForCausalLM(LlamaConfig(**settings["model"]))
model = get_peft_model(model, LoraConfig(**settings["lora"]))
model.print_trainable_parameters()
