"""LoRA fine-tuning of a small T5 for question answering over short facts, then answering questions.

Facts and questions are generated in code; the model is a tiny T5 built from a config and the
tokenizer a word-level fast tokenizer built from the data.
"""
import argparse
import random

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration
from peft import LoraConfig, TaskType, get_peft_model

PEOPLE = ["alice", "bruno", "chen", "dara"]
CITIES = ["paris", "lima", "oslo", "cairo"]


def make_examples(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        who, city = rng.choice(PEOPLE), rng.choice(CITIES)
        out.append((f"question : where does {who} live ? context : {who} lives in {city} .", city))
    return out


def build_tokenizer():
    words = {"question", ":", "where", "does", "live", "?", "context", "lives", "in", "."} | set(PEOPLE) | set(CITIES)
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    vocab.update({w: i + 3 for i, w in enumerate(sorted(words))})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def evaluate(model, tokenizer, examples, max_new_tokens):
    model.eval()
    correct = 0
    for question, answer in examples:
        input_ids = tokenizer(question, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(input_ids, max_new_tokens=max_new_tokens)
        prediction = tokenizer.decode(out[0], skip_special_tokens=True).strip()
        correct += prediction == answer
    return correct / len(examples)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--r", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--max_new_tokens", type=int, default=4)
    args = parser.parse_args()

    tokenizer = build_tokenizer()
    base = T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                               num_heads=4, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1))
    peft_config = LoraConfig(task_type=TaskType.SEQ_2_SEQ_LM, inference_mode=False, r=args.r, lora_alpha=32,
                             lora_dropout=0.1, target_modules=["q", "v"])
    model = get_peft_model(base, peft_config)
    model.print_trainable_parameters()

    train = make_examples(32, 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    for step in range(args.steps):
        batch = train[step * 8:(step + 1) * 8]
        enc = tokenizer([q for q, _ in batch], padding=True, return_tensors="pt")
        labels = tokenizer([a for _, a in batch], padding=True, return_tensors="pt").input_ids
        loss = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step}: loss {loss.item():.3f}")

    print("exact match:", evaluate(model, tokenizer, make_examples(8, 1), args.max_new_tokens))


if __name__ == "__main__":
    main()
