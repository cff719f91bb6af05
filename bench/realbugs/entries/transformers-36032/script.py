"""Summarisation inference with a T5 checkpoint exported by our older training pipeline.

The export step (reproduced here with a small SentencePiece model and a small T5 built from a
config) wrote the tokenizer config with the options the pipeline used at training time,
including add_special_tokens. Loading that folder back is what this job does.
"""
import io
import json
import os
import tempfile

import sentencepiece as spm
import torch
from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration, T5Tokenizer

CORPUS = [
    "summarize: the council approved the new budget for the city parks",
    "summarize: heavy rain closed two roads in the north of the county",
    "summarize: the team won the final after a late goal",
    "the budget was approved",
    "roads closed after rain",
    "team wins final",
] * 20
EXPORT_OPTIONS = {"add_special_tokens": True, "model_max_length": 64}


def train_sentencepiece(path):
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=buf, vocab_size=64,
                                   model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
                                   character_coverage=1.0, hard_vocab_limit=False)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def export_checkpoint(folder):
    os.makedirs(folder, exist_ok=True)
    train_sentencepiece(os.path.join(folder, "spiece.model"))
    tokenizer = T5Tokenizer(os.path.join(folder, "spiece.model"), extra_ids=0)
    tokenizer.save_pretrained(folder)
    # the old pipeline stored its tokenizer call options next to the tokenizer's own
    cfg_path = os.path.join(folder, "tokenizer_config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg.update(EXPORT_OPTIONS)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    config = T5Config(vocab_size=tokenizer.vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=2,
                      decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).save_pretrained(folder)


def main():
    folder = os.path.join(tempfile.mkdtemp(), "t5-summariser")
    export_checkpoint(folder)

    tokenizer = AutoTokenizer.from_pretrained(folder, use_fast=False)
    model = T5ForConditionalGeneration.from_pretrained(folder).eval()
    for text in CORPUS[:3]:
        ids = tokenizer(text, return_tensors="pt").input_ids
        out = model.generate(ids, max_new_tokens=8)
        print(text, "->", tokenizer.decode(out[0], skip_special_tokens=True))


if __name__ == "__main__":
    main()
