"""A custom inference handler (the shape an inference endpoint expects) serving a LoRA fine-tune.

The repository folder is laid out here as it arrives from the Hub: the base model, and the
adapter as it was saved by the training job (adapter_config.json and its weights). The base model
is a tiny Llama built from a config; the tokenizer is a byte-level stand-in.
"""
import argparse
import json
import os
import tempfile

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
from peft import PeftModel

HIDDEN, LAYERS, HEADS, RANK = 32, 2, 4, 8

# adapter_config.json as the training job wrote it.
ADAPTER_CONFIG = {
    "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": "base",
    "bias": "none", "fan_in_fan_out": False, "inference_mode": True, "init_lora_weights": True,
    "layer_replication": None, "layers_pattern": None, "layers_to_transform": None,
    "loftq_config": {}, "lora_alpha": 16, "lora_dropout": 0.05, "megatron_config": None,
    "megatron_core": "megatron.core", "modules_to_save": None, "peft_type": "LORA", "r": RANK,
    "rank_pattern": {}, "revision": None, "target_modules": ["q_proj", "v_proj"],
    "task_type": "CAUSAL_LM", "use_dora": False, "use_rslora": False,
}


def lay_out_repository(root):
    """The model repository: base weights in base/, the fine-tune in adapter/."""
    config = LlamaConfig(vocab_size=259, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=128,
                         bos_token_id=256, eos_token_id=257, pad_token_id=258)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(os.path.join(root, "base"))
    adapter_dir = os.path.join(root, "adapter")
    os.makedirs(adapter_dir, exist_ok=True)
    with open(os.path.join(adapter_dir, "adapter_config.json"), "w") as f:
        json.dump(dict(ADAPTER_CONFIG, base_model_name_or_path=os.path.join(root, "base")), f, indent=2)
    weights = {}
    for layer in range(LAYERS):
        for proj in ("q_proj", "v_proj"):
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{proj}"
            weights[f"{prefix}.lora_A.weight"] = torch.randn(RANK, HIDDEN) * 0.01
            weights[f"{prefix}.lora_B.weight"] = torch.zeros(HIDDEN, RANK)
    save_file(weights, os.path.join(adapter_dir, "adapter_model.safetensors"))
    return root


class ByteTokenizer:
    bos, eos = 256, 257

    def encode(self, text):
        return [self.bos] + list(text.encode("utf-8"))

    def decode(self, ids):
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


class EndpointHandler:
    def __init__(self, path=""):
        self.tokenizer = ByteTokenizer()
        base = AutoModelForCausalLM.from_pretrained(os.path.join(path, "base"), torch_dtype=torch.float32)
        self.model = PeftModel.from_pretrained(base, os.path.join(path, "adapter"))
        self.model.eval()

    def __call__(self, data):
        prompt = data.get("inputs", "")
        params = data.get("parameters", {})
        ids = torch.tensor([self.tokenizer.encode(prompt)])
        with torch.no_grad():
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                      max_new_tokens=params.get("max_new_tokens", 8), do_sample=False,
                                      pad_token_id=258)
        return [{"generated_text": self.tokenizer.decode(out[0].tolist())}]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", default=None, help="model repository folder (laid out here when missing)")
    parser.add_argument("--prompt", default="Summarise: the meeting moved to Tuesday.")
    args = parser.parse_args()
    repo = args.repo or lay_out_repository(tempfile.mkdtemp(prefix="endpoint-"))
    handler = EndpointHandler(repo)
    print(handler({"inputs": args.prompt, "parameters": {"max_new_tokens": 6}}))


if __name__ == "__main__":
    main()
