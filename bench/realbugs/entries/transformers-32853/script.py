"""Generate continuations with a Jamba (hybrid attention + Mamba) checkpoint.

Same as the model card's sample, with an explicit device map: the last block is offloaded to
disk because the full checkpoint does not fit our box. A small Jamba is built from a config and
saved first (no mamba-ssm kernels on this machine, so the slow path runs).
"""
import argparse
import json
import os
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, JambaConfig, JambaForCausalLM, PreTrainedTokenizerFast

PROMPTS = ["In the recent Super Bowl LVIII,", "The weather in Lisbon today"]
DEVICE = "cuda:0" if torch.cuda.is_available() else "cpu"
DEVICE_MAP = {"model.embed_tokens": DEVICE, "model.layers.0": DEVICE, "model.layers.1": "disk",
              "model.final_layernorm": DEVICE, "lm_head": DEVICE}


def save_small_jamba(folder):
    words = sorted({w for p in PROMPTS for w in p.split()} | {"the", "a", "was", "and", "game"})
    vocab = {"<unk>": 0, "<|startoftext|>": 1, "<|endoftext|>": 2, "<|pad|>": 3}
    for w in words:
        vocab[w] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<|startoftext|>",
                            eos_token="<|endoftext|>", pad_token="<|pad|>").save_pretrained(folder)
    config = JambaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, num_experts=2, num_experts_per_tok=1,
                         expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2,
                         attn_layer_offset=1, mamba_d_state=4, mamba_d_conv=2, mamba_expand=2,
                         mamba_dt_rank=4, use_mamba_kernels=False, pad_token_id=3, bos_token_id=1,
                         eos_token_id=2)
    torch.manual_seed(0)
    JambaForCausalLM(config).save_pretrained(folder)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max_new_tokens", type=int, default=16)
    ap.add_argument("--out", default="generations.jsonl")
    return ap.parse_args()


def main():
    args = parse_args()
    folder = os.path.join(tempfile.mkdtemp(), "jamba-small")
    save_small_jamba(folder)

    model = AutoModelForCausalLM.from_pretrained(folder, device_map=DEVICE_MAP, use_mamba_kernels=False,
                                                 offload_folder=os.path.join(folder, "offload"))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    with open(args.out, "w") as sink:
        for prompt in PROMPTS:
            input_ids = tokenizer(prompt, return_tensors="pt").to(model.device)["input_ids"]
            outputs = model.generate(input_ids, max_new_tokens=args.max_new_tokens)
            text = tokenizer.batch_decode(outputs)
            print(text)
            sink.write(json.dumps({"prompt": prompt, "completion": text[0]}) + "\n")


if __name__ == "__main__":
    main()
