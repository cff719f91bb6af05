"""Contrastive decoding between an expert (teacher) and an amateur (student) model.

Research code: the teacher's generate() is called with our extra decoding options (the student
model, a plausibility threshold, a temperature for the student), which our patched decoding loop
used to read out of model_kwargs. Both models are small GPT-2s built from configs.
"""
import argparse

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

PROMPTS = ["the quick brown fox", "once upon a time there", "in the beginning the"]


def parse_args():
    ap = argparse.ArgumentParser(description="contrastive decoding")
    ap.add_argument("--min_prob", type=float, default=0.1, help="plausibility threshold (alpha)")
    ap.add_argument("--student_temperature", type=float, default=0.5)
    ap.add_argument("--max_new_tokens", type=int, default=10)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<unk>": 0, "<|endoftext|>": 1}
    for p in PROMPTS:
        for w in p.split():
            vocab.setdefault(w, len(vocab))
    for w in ["jumps", "over", "lazy", "dog", "was", "king", "world", "end"]:
        vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>")
    tok.pad_token = tok.eos_token
    return tok


def build_model(vocab_size, layers, seed):
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=layers, n_head=2, n_positions=64,
                     bos_token_id=1, eos_token_id=1)
    return GPT2LMHeadModel(cfg).eval()


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    teacher = build_model(len(tokenizer), layers=4, seed=0)
    student = build_model(len(tokenizer), layers=1, seed=1)

    for prompt in PROMPTS:
        enc = tokenizer(prompt, return_tensors="pt")
        out = teacher.generate(
            **enc,
            max_new_tokens=args.max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.eos_token_id,
            student_lm=student,
            teacher_student=True,
            min_prob=args.min_prob,
            student_temperature=args.student_temperature,
        )
        print(prompt, "->", tokenizer.decode(out[0][enc["input_ids"].shape[1]:]))


if __name__ == "__main__":
    main()
