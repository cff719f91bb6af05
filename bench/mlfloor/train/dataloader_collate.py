"""Fine-tuning data pipeline: word-level tokenizer built in code, a map-style dataset of
(prompt, response) pairs, and a spawn-based DataLoader whose collate_fn pads each batch with
transformers' DataCollatorWithPadding.
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import sys
from dataclasses import dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch.utils.data import DataLoader, Dataset
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import DataCollatorWithPadding, PreTrainedTokenizerFast

log = logging.getLogger("data")

SPECIALS = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]
WORDS = ("the a cat dog bird sat ran flew on over under mat log tree quickly slowly "
         "what did where why how answer question").split()


@dataclass
class DataConfig:
    n_examples: int = 16
    batch_size: int = 4
    num_workers: int = 2
    max_length: int = 24
    seed: int = 0
    mask_prompt: bool = True


def build_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {tok: i for i, tok in enumerate(SPECIALS + WORDS)}
    backend = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]",
        bos_token="[BOS]", eos_token="[EOS]",
    )


def synth_pairs(n, seed):
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 7)))
        response = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))
        pairs.append((prompt, response))
    return pairs


class PairDataset(Dataset):
    def __init__(self, pairs, tokenizer, max_length, mask_prompt):
        self.pairs = pairs
        self.tok = tokenizer
        self.max_length = max_length
        self.mask_prompt = mask_prompt

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, idx):
        prompt, response = self.pairs[idx]
        p_ids = self.tok(prompt, add_special_tokens=False)["input_ids"]
        r_ids = self.tok(response, add_special_tokens=False)["input_ids"]
        ids = [self.tok.bos_token_id] + p_ids + r_ids + [self.tok.eos_token_id]
        ids = ids[: self.max_length]
        labels = list(ids)
        if self.mask_prompt:
            for i in range(min(len(p_ids) + 1, len(labels))):
                labels[i] = -100
        return {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels}


class PadCollator:
    """Pads input_ids/attention_mask with the tokenizer; labels ride along."""

    def __init__(self, tokenizer):
        self.inner = DataCollatorWithPadding(tokenizer, padding="longest", return_tensors="pt")

    def __call__(self, features):
        batch = self.inner(features)
        batch["labels"] = batch["labels"].masked_fill(batch["attention_mask"] == 0, -100)
        return batch


def parse_args(argv=None) -> DataConfig:
    p = argparse.ArgumentParser()
    p.add_argument("--n-examples", type=int, default=DataConfig.n_examples)
    p.add_argument("--batch-size", type=int, default=DataConfig.batch_size)
    p.add_argument("--num-workers", type=int, default=DataConfig.num_workers)
    p.add_argument("--max-length", type=int, default=DataConfig.max_length)
    p.add_argument("--seed", type=int, default=DataConfig.seed)
    a = p.parse_args(argv)
    return DataConfig(a.n_examples, a.batch_size, a.num_workers, a.max_length, a.seed)


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    cfg = parse_args(argv)
    tok = build_tokenizer()
    ds = PairDataset(synth_pairs(cfg.n_examples, cfg.seed), tok, cfg.max_length, cfg.mask_prompt)
    loader = DataLoader(
        ds, batch_size=cfg.batch_size, shuffle=True, num_workers=cfg.num_workers,
        multiprocessing_context="spawn", collate_fn=PadCollator(tok),
        generator=torch.Generator().manual_seed(cfg.seed),
    )
    n_tokens = 0
    for step, batch in enumerate(loader):
        n_tokens += int(batch["attention_mask"].sum())
        log.info("batch %d: %s", step, tuple(batch["input_ids"].shape))
    log.info("%d batches, %d tokens", step + 1, n_tokens)
    return 0


if __name__ == "__main__":
    sys.exit(main())
