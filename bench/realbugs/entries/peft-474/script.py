"""Prompt tuning a small T5 to label product reviews positive / negative / neutral.

The prompt configuration is spelled out in full (token dimension, heads, layers), the way the
PromptEmbedding reference example does it. The model is a tiny T5 built from a config; the
tokenizer is a word-level fast tokenizer built and saved here so the init text can be tokenized.
"""
import argparse
import os
import random
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration
from peft import PromptTuningConfig, get_peft_model

INIT_TEXT = "Predict if sentiment of this review is positive, negative or neutral"
REVIEWS = {
    "positive": ["works great", "love this product", "excellent value"],
    "negative": ["broke after a week", "terrible support", "waste of money"],
    "neutral": ["arrived on time", "it is a cable", "average quality"],
}
MODEL = {"d_model": 32, "num_heads": 4, "num_layers": 2}


def build_tokenizer(out_dir):
    words = set(INIT_TEXT.replace(",", " ,").split()) | {","}
    for label, texts in REVIEWS.items():
        words.add(label)
        for t in texts:
            words.update(t.split())
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    vocab.update({w: i + 3 for i, w in enumerate(sorted(words))})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(out_dir)
    return fast


def make_batch(tokenizer, n, seed):
    rng = random.Random(seed)
    labels = [rng.choice(sorted(REVIEWS)) for _ in range(n)]
    texts = [rng.choice(REVIEWS[l]) for l in labels]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    target = tokenizer(labels, padding=True, return_tensors="pt").input_ids
    target[target == tokenizer.pad_token_id] = -100
    return enc, target


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_virtual_tokens", type=int, default=20)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.3)
    args = parser.parse_args()

    tok_dir = os.path.join(tempfile.mkdtemp(), "review-words")
    tokenizer = build_tokenizer(tok_dir)
    t5 = T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=MODEL["d_model"], d_kv=8, d_ff=64,
                                             num_layers=MODEL["num_layers"], num_heads=MODEL["num_heads"],
                                             decoder_start_token_id=0, pad_token_id=0, eos_token_id=1))

    config = PromptTuningConfig(
        peft_type="PROMPT_TUNING",
        task_type="SEQ_2_SEQ_LM",
        num_virtual_tokens=args.num_virtual_tokens,
        token_dim=MODEL["d_model"],
        num_transformer_submodules=1,
        num_attention_heads=MODEL["num_heads"],
        num_layers=MODEL["num_layers"],
        prompt_tuning_init="TEXT",
        prompt_tuning_init_text=INIT_TEXT,
        tokenizer_name_or_path=tok_dir,
    )
    model = get_peft_model(t5, config)
    model.print_trainable_parameters()

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    for step in range(args.steps):
        enc, target = make_batch(tokenizer, 8, step)
        loss = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask, labels=target).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
