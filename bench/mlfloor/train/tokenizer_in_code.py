"""Build a domain tokenizer from a small in-code corpus (no download) and encode a classification
dataset with it into padded tensors ready for a BERT-style classifier.
"""
from __future__ import annotations

import argparse
import collections
import logging
import os
import sys
from dataclasses import dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

log = logging.getLogger("tok")

CORPUS = [
    ("the patient reports mild chest pain", "cardio"),
    ("blood pressure elevated after exercise", "cardio"),
    ("persistent cough and mild fever", "resp"),
    ("shortness of breath when climbing stairs", "resp"),
    ("skin rash on both arms", "derm"),
    ("itching and redness near the elbow", "derm"),
]
LABELS = {"cardio": 0, "resp": 1, "derm": 2}


@dataclass
class TokConfig:
    min_freq: int = 1
    max_length: int = 16
    lowercase: bool = True
    unk_token: str = "[UNK]"
    cls_token: str = "[CLS]"
    sep_token: str = "[SEP]"
    specials: tuple = ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]")


def count_words(texts, lowercase):
    counter = collections.Counter()
    for text in texts:
        counter.update((text.lower() if lowercase else text).split())
    return counter


def build_vocab(counter, cfg: TokConfig):
    vocab = {tok: i for i, tok in enumerate(cfg.specials)}
    for word, freq in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])):
        if freq >= cfg.min_freq and word not in vocab:
            vocab[word] = len(vocab)
    return vocab


def build_tokenizer(cfg: TokConfig) -> PreTrainedTokenizerFast:
    counter = count_words([t for t, _ in CORPUS], cfg.lowercase)
    vocab = build_vocab(counter, cfg)
    backend = Tokenizer(WordLevel(vocab, unk_token=cfg.unk_token))
    backend.normalizer = normalizers.Sequence([normalizers.NFKC()] + ([normalizers.Lowercase()] if cfg.lowercase else []))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(
        single=f"{cfg.cls_token} $A {cfg.sep_token}",
        pair=f"{cfg.cls_token} $A {cfg.sep_token} $B:1 {cfg.sep_token}:1",
        special_tokens=[(cfg.cls_token, vocab[cfg.cls_token]), (cfg.sep_token, vocab[cfg.sep_token])],
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token=cfg.unk_token, cls_token=cfg.cls_token,
        sep_token=cfg.sep_token, model_max_length=cfg.max_length,
    )
    log.info("vocab of %d entries (%d specials)", len(vocab), len(cfg.specials))
    return tok


def encode_dataset(tok, rows, max_length):
    texts = [text for text, _ in rows]
    labels = [LABELS[label] for _, label in rows]
    enc = tok(texts, padding="longest", truncation=True, max_length=max_length, return_tensors="pt")
    enc["labels"] = labels
    return enc


def report(enc):
    lengths = enc["attention_mask"].sum(dim=1).tolist()
    log.info("batch %s, lengths %s", tuple(enc["input_ids"].shape), lengths)


def parse_args(argv=None) -> TokConfig:
    p = argparse.ArgumentParser()
    p.add_argument("--min-freq", type=int, default=1)
    p.add_argument("--max-length", type=int, default=16)
    p.add_argument("--cased", action="store_true")
    a = p.parse_args(argv)
    return TokConfig(min_freq=a.min_freq, max_length=a.max_length, lowercase=not a.cased)


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    cfg = parse_args(argv)
    tok = build_tokenizer(cfg)
    enc = encode_dataset(tok, CORPUS, cfg.max_length)
    report(enc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
