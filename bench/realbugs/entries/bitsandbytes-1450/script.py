"""Prepare an 8-bit Llama for LoRA fine-tuning (notebook steps exported to a script).

The base model is a tiny Llama built from a config; it goes through the same quantizer steps
`from_pretrained(..., quantization_config=...)` runs around weight loading (linear layers swapped
for bitsandbytes 8-bit layers, the model marked as loaded in 8 bit), on the CPU, where the weights
stay unquantized. The tokenizer is a character-level stand-in.
"""
import argparse

import torch
from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM
from transformers.quantizers import AutoHfQuantizer
from peft import LoraConfig, get_peft_model

TEXT = "the quick brown fox jumps over the lazy dog and keeps on running through the field"


class CharTokenizer:
    def __init__(self, text):
        self.chars = sorted(set(text))
        self.pad_token_id = self.eos_token_id = len(self.chars)

    def __call__(self, text):
        return [self.chars.index(c) for c in text if c in self.chars] + [self.eos_token_id]

    def __len__(self):
        return len(self.chars) + 1


def load_8bit_model(vocab_size, quantization_config):
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128)
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    quantizer = AutoHfQuantizer.from_config(quantization_config)
    quantizer.preprocess_model(model=model, device_map={"": "cpu"}, keep_in_fp32_modules=[])
    model = model.to_empty(device="cpu")
    return quantizer.postprocess_model(model)


def count(model):
    kinds = {}
    for module in model.modules():
        kinds[type(module).__name__] = kinds.get(type(module).__name__, 0) + 1
    return {k: v for k, v in kinds.items() if "Linear" in k}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--r", type=int, default=2)
    parser.add_argument("--alpha", type=int, default=16)
    parser.add_argument("--dropout", type=float, default=0.01)
    args = parser.parse_args()

    tokenizer = CharTokenizer(TEXT)
    bnb_config = BitsAndBytesConfig(load_in_8bit=True)
    model = load_8bit_model(len(tokenizer), bnb_config)
    print("linear layers:", count(model))
    tokenizer.pad_token = tokenizer.eos_token_id

    peft_config = LoraConfig(task_type="CAUSAL_LM", r=args.r, lora_alpha=args.alpha, lora_dropout=args.dropout)
    model = get_peft_model(model, peft_config)
    model.print_trainable_parameters()
    ids = torch.tensor([tokenizer(TEXT[:24])])
    print("prompt length", ids.shape[1])


if __name__ == "__main__":
    main()
