"""Chat assistant demo: adds role tokens to the tokenizer so prompts follow our chat format,
then answers a few questions with greedy generation.

The base model is a small Llama saved from a config (stand-in for the checkpoint we serve).
"""
import argparse
import os
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
SYSTEM = "you are a helpful assistant"
QUESTIONS = ["what is the capital of france", "name a prime number", "how many days are in a week"]


def export_base(folder):
    words = sorted({w for t in QUESTIONS + [SYSTEM] for w in t.split()} | {"paris", "seven", "three"})
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for w in words:
        vocab[w] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                            model_input_names=["input_ids", "attention_mask"]).save_pretrained(folder)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)


def format_chat(question):
    return f"<|system|> {SYSTEM} <|end|> <|user|> {question} <|end|> <|assistant|>"


def parse_args():
    ap = argparse.ArgumentParser(description="chat demo")
    ap.add_argument("--max_new_tokens", type=int, default=8)
    ap.add_argument("--greedy", action="store_true", default=True)
    return ap.parse_args()


def main():
    args = parse_args()
    folder = os.path.join(tempfile.mkdtemp(), "base")
    export_base(folder)

    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.add_special_tokens({"additional_special_tokens": ROLE_TOKENS, "pad_token": "<|end|>"})
    model = AutoModelForCausalLM.from_pretrained(folder)
    model.eval()

    for question in QUESTIONS:
        inputs = tokenizer(format_chat(question), return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=args.max_new_tokens, do_sample=not args.greedy,
                                 pad_token_id=tokenizer.pad_token_id,
                                 eos_token_id=tokenizer.convert_tokens_to_ids("<|end|>"))
        answer = tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        print(f"Q: {question}\nA: {answer}\n")


if __name__ == "__main__":
    main()
