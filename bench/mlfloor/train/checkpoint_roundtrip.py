"""Two-stage MLM job with a checkpoint in between.

Stage 1 pretrains a tiny BERT for a few steps and saves model + tokenizer to a run folder.
Stage 2 (normally a separate job) reloads the folder, extends the tokenizer with domain tokens
and continues training with the model config sized to the new tokenizer.
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import (AutoTokenizer, BertConfig, BertForMaskedLM, DataCollatorForLanguageModeling,
                          PreTrainedTokenizerFast)

log = logging.getLogger("mlm")

BASE_WORDS = "the a of and to in is was for on with as by at it from".split()
DOMAIN_TOKENS = ["<gene>", "<protein>", "<dose>"]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

MODEL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=32)


def build_tokenizer():
    vocab = {w: i for i, w in enumerate(SPECIALS + BASE_WORDS)}
    backend = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


def sentences(n, words, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(4, 9))) for _ in range(n)]


def train_steps(model, tok, texts, steps, lr):
    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.3)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        feats = [tok(t) for t in texts[step * 4:(step + 1) * 4]]
        batch = collator(feats)
        loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        log.info("step %d loss %.4f", step, loss.item())


def stage1(run_dir: Path, steps: int, seed: int):
    torch.manual_seed(seed)
    tok = build_tokenizer()
    model = BertForMaskedLM(BertConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, **MODEL))
    train_steps(model, tok, sentences(steps * 4, BASE_WORDS, seed), steps, 1e-3)
    model.save_pretrained(run_dir)
    tok.save_pretrained(run_dir)
    log.info("stage 1 saved to %s", run_dir)


def stage2(run_dir: Path, steps: int, seed: int):
    tok = AutoTokenizer.from_pretrained(run_dir)
    added = tok.add_tokens(DOMAIN_TOKENS)
    log.info("added %d domain tokens, tokenizer now has %d", added, len(tok))
    config = BertConfig.from_pretrained(run_dir, vocab_size=len(tok))
    model = BertForMaskedLM.from_pretrained(run_dir, config=config)
    words = BASE_WORDS + DOMAIN_TOKENS
    train_steps(model, tok, sentences(steps * 4, words, seed + 1), steps, 5e-4)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--run-dir", default=None)
    p.add_argument("--stage1-steps", type=int, default=2)
    p.add_argument("--stage2-steps", type=int, default=2)
    p.add_argument("--seed", type=int, default=11)
    return p.parse_args()


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(args.run_dir or tmp) / "mlm-run"
        stage1(run_dir, args.stage1_steps, args.seed)
        stage2(run_dir, args.stage2_steps, args.seed)


if __name__ == "__main__":
    main()
