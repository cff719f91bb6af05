"""Quick-start LoRA fine-tuning of a small Llama on a summarisation toy set (notebook exported to a script).

The model is a tiny Llama built from a config, the "dialogues" are generated in code, and the
tokenizer is a word-level mapping built from them.
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
)

NAMES = ["amy", "bob", "cara", "dan"]
PLACES = ["park", "office", "station", "cafe"]
TIMES = ["monday", "noon", "friday", "tonight"]


def make_samples(n, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.sample(NAMES, 2)
        place, time = rng.choice(PLACES), rng.choice(TIMES)
        dialogue = f"{a} : meet at the {place} {time} ? {b} : sure see you at the {place}"
        summary = f"{a} and {b} meet at the {place} {time}"
        out.append(f"summarize : {dialogue} summary : {summary}")
    return out


class WordTokenizer:
    def __init__(self, texts):
        words = sorted({w for t in texts for w in t.split()})
        self.vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
        self.vocab.update({w: i + 3 for i, w in enumerate(words)})

    def __call__(self, text, max_len):
        ids = [1] + [self.vocab[w] for w in text.split()] + [2]
        ids = ids[:max_len] + [0] * max(0, max_len - len(ids))
        return ids


def get_preprocessed_dataset(tokenizer, samples, max_len):
    ids = torch.tensor([tokenizer(s, max_len) for s in samples])
    labels = ids.clone()
    labels[ids == 0] = -100
    return ids, (ids != 0).long(), labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-len", type=int, default=40)
    args = parser.parse_args()

    samples = make_samples(32)
    tokenizer = WordTokenizer(samples)
    config = LlamaConfig(vocab_size=len(tokenizer.vocab), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=64, pad_token_id=0)
    model = LlamaForCausalLM(config)

    model = prepare_model_for_int8_training(model)
    peft_config = LoraConfig(task_type="CAUSAL_LM", inference_mode=False, r=8, lora_alpha=32,
                             lora_dropout=0.05, target_modules=["q_proj", "v_proj"])
    model = get_peft_model(model, peft_config)
    model.print_trainable_parameters()

    ids, mask, labels = get_preprocessed_dataset(tokenizer, samples, args.max_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    for epoch in range(args.epochs):
        for i in range(0, len(ids), args.batch_size):
            out = model(input_ids=ids[i:i + args.batch_size], attention_mask=mask[i:i + args.batch_size],
                        labels=labels[i:i + args.batch_size])
            out.loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        print(f"epoch {epoch}: loss {out.loss.item():.3f}")
    print(len(get_peft_model_state_dict(model)), "adapter tensors")


if __name__ == "__main__":
    main()
