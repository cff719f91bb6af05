"""Chat endpoint smoke test: a text-generation pipeline over our fine-tuned Llama chat model,
fed OpenAI-style message lists, as the serving layer does.

The checkpoint (model, tokenizer with its chat template) is exported here from a small Llama
built from a config, the way our CI builds its fixture.
"""
import argparse
import json
import os
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, pipeline

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
CONVERSATIONS = [
    [{"role": "system", "content": "you answer briefly"}, {"role": "user", "content": "what is two plus two"}],
    [{"role": "user", "content": "name a colour"}],
]
WORDS = ["you", "answer", "briefly", "what", "is", "two", "plus", "four", "name", "a", "colour", "blue"]


def export_fixture(folder):
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<|system|>": 3, "<|user|>": 4, "<|assistant|>": 5, "<|end|>": 6}
    for w in WORDS:
        vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                  pad_token="</s>", model_input_names=["input_ids", "attention_mask"])
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(folder)
    # the fixture declares the tokenizer class of the model family, as the real checkpoint does
    cfg_path = os.path.join(folder, "tokenizer_config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["tokenizer_class"] = "LlamaTokenizer"
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max_new_tokens", type=int, default=6)
    return ap.parse_args()


def main():
    args = parse_args()
    folder = os.path.join(tempfile.mkdtemp(), "chat-fixture")
    export_fixture(folder)
    chat = pipeline("text-generation", model=folder, tokenizer=folder)
    for messages in CONVERSATIONS:
        out = chat(messages, max_new_tokens=args.max_new_tokens, do_sample=False)
        reply = out[0]["generated_text"][-1]
        print(messages[-1]["content"], "->", reply)


if __name__ == "__main__":
    main()
