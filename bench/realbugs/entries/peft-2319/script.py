"""Alpaca-style instruction tuning with LoRA (a finetune.py in the shape of the popular recipes).

Instructions and responses are generated in code; the base model is a tiny Llama built from a
config and the tokenizer a word-level mapping over the generated prompts.
"""
import argparse
import random

import torch
from transformers import LlamaConfig, LlamaForCausalLM
from peft import (
    LoraConfig,
    get_peft_model,
    get_peft_model_state_dict,
    prepare_model_for_int8_training,
    set_peft_model_state_dict,
)

TEMPLATE = "below is an instruction . write a response . instruction : {instruction} response : {response}"
COLORS = ["red", "green", "blue", "yellow"]
THINGS = ["apple", "leaf", "sky", "sun"]


def generate_examples(n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        thing = rng.choice(THINGS)
        color = COLORS[THINGS.index(thing)]
        rows.append({"instruction": f"what color is the {thing} ?", "response": f"the {thing} is {color} ."})
    return rows


class Vocab:
    def __init__(self, texts):
        words = sorted({w for t in texts for w in t.split()})
        self.ids = {"<pad>": 0, "<s>": 1, "</s>": 2}
        self.ids.update({w: i + 3 for i, w in enumerate(words)})

    def encode(self, text, cutoff_len):
        ids = [1] + [self.ids[w] for w in text.split()] + [2]
        return ids[:cutoff_len]


def tokenize_all(rows, vocab, cutoff_len):
    batch = [vocab.encode(TEMPLATE.format(**r), cutoff_len) for r in rows]
    width = max(len(b) for b in batch)
    ids = torch.tensor([b + [0] * (width - len(b)) for b in batch])
    labels = ids.clone()
    labels[ids == 0] = -100
    return ids, (ids != 0).long(), labels


def train(args):
    rows = generate_examples(48, 0)
    vocab = Vocab([TEMPLATE.format(**r) for r in rows])
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(vocab.ids), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                         max_position_embeddings=64, pad_token_id=0))
    model = prepare_model_for_int8_training(model)
    config = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha, target_modules=args.lora_target_modules,
                        lora_dropout=args.lora_dropout, bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(model, config)
    model.print_trainable_parameters()

    ids, mask, labels = tokenize_all(rows, vocab, args.cutoff_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    model.train()
    for epoch in range(args.num_epochs):
        for i in range(0, len(ids), args.micro_batch_size):
            out = model(input_ids=ids[i:i + args.micro_batch_size], attention_mask=mask[i:i + args.micro_batch_size],
                        labels=labels[i:i + args.micro_batch_size])
            out.loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        print(f"epoch {epoch}: loss {out.loss.item():.3f}")
    state = get_peft_model_state_dict(model)
    set_peft_model_state_dict(model, state)
    print(f"{len(state)} adapter tensors")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_epochs", type=int, default=1)
    parser.add_argument("--learning_rate", type=float, default=3e-4)
    parser.add_argument("--cutoff_len", type=int, default=48)
    parser.add_argument("--micro_batch_size", type=int, default=8)
    parser.add_argument("--lora_r", type=int, default=8)
    parser.add_argument("--lora_alpha", type=int, default=16)
    parser.add_argument("--lora_dropout", type=float, default=0.05)
    parser.add_argument("--lora_target_modules", nargs="+", default=["q_proj", "v_proj"])
    train(parser.parse_args())


if __name__ == "__main__":
    main()
