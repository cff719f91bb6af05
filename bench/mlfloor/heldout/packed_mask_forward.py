"""Evaluate a tiny causal LM on packed documents with a block-diagonal (per-document) attention mask.

Pipeline: raw documents -> token ids -> greedy packing into fixed-length rows -> per-row
block-causal 4D mask -> BOS prepended -> batched forward in the requested dtype -> loss/ppl.

    python packed_mask_forward.py --pack-len 24 --batch-size 2 --dtype bfloat16
"""
from __future__ import annotations

import argparse
import logging
import math
from dataclasses import dataclass
from typing import Dict, List

import torch
from transformers import LlamaConfig, LlamaForCausalLM

logger = logging.getLogger("packed_eval")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
BOS_ID, EOS_ID, PAD_ID = 1, 2, 0


@dataclass
class EvalConfig:
    pack_len: int = 24
    batch_size: int = 2
    dtype: str = "bfloat16"
    vocab_size: int = 128
    hidden_size: int = 32
    layers: int = 2
    heads: int = 4
    n_docs: int = 9
    seed: int = 0


def parse_args() -> EvalConfig:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pack-len", type=int, default=24)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    p.add_argument("--n-docs", type=int, default=9)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    return EvalConfig(pack_len=a.pack_len, batch_size=a.batch_size, dtype=a.dtype,
                      n_docs=a.n_docs, seed=a.seed)


def synthetic_documents(cfg: EvalConfig) -> List[List[int]]:
    g = torch.Generator().manual_seed(cfg.seed)
    docs = []
    for _ in range(cfg.n_docs):
        n = int(torch.randint(3, cfg.pack_len // 2, (1,), generator=g))
        docs.append(torch.randint(3, cfg.vocab_size, (n,), generator=g).tolist() + [EOS_ID])
    return docs


def pack(docs: List[List[int]], pack_len: int) -> List[Dict[str, List[int]]]:
    """Greedy packing; doc_ids marks which document each position belongs to (-1 = padding)."""
    rows, cur_ids, cur_doc = [], [], []
    for d, doc in enumerate(docs):
        if len(cur_ids) + len(doc) > pack_len:
            rows.append({"ids": cur_ids, "doc": cur_doc})
            cur_ids, cur_doc = [], []
        cur_ids = cur_ids + doc[:pack_len]
        cur_doc = cur_doc + [d] * len(doc[:pack_len])
    if cur_ids:
        rows.append({"ids": cur_ids, "doc": cur_doc})
    for r in rows:
        pad = pack_len - len(r["ids"])
        r["ids"] = r["ids"] + [PAD_ID] * pad
        r["doc"] = r["doc"] + [-1] * pad
    return rows


def block_causal_mask(doc_ids: torch.Tensor) -> torch.Tensor:
    """(B, L) document ids -> (B, 1, L, L) boolean mask, True where attention is allowed."""
    L = doc_ids.shape[-1]
    same_doc = doc_ids[:, :, None] == doc_ids[:, None, :]
    causal = torch.tril(torch.ones(L, L, dtype=torch.bool))
    valid = (doc_ids >= 0)[:, None, :]
    mask = same_doc & causal & valid
    mask |= torch.eye(L, dtype=torch.bool)  # padding rows attend to themselves
    return mask[:, None, :, :]


def collate(rows: List[Dict[str, List[int]]]) -> Dict[str, torch.Tensor]:
    ids = torch.tensor([r["ids"] for r in rows])
    doc = torch.tensor([r["doc"] for r in rows])
    return {"input_ids": ids, "attention_mask": block_causal_mask(doc), "doc_ids": doc}


def add_bos(batch: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    bos = torch.full((batch["input_ids"].shape[0], 1), BOS_ID)
    batch["input_ids"] = torch.cat([bos, batch["input_ids"]], dim=1)
    batch["doc_ids"] = torch.cat([batch["doc_ids"][:, :1], batch["doc_ids"]], dim=1)
    return batch


def make_labels(batch: Dict[str, torch.Tensor]) -> torch.Tensor:
    labels = batch["input_ids"].clone()
    labels[batch["doc_ids"] < 0] = -100
    return labels


def build_model(cfg: EvalConfig) -> LlamaForCausalLM:
    torch.manual_seed(cfg.seed)
    config = LlamaConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
                         intermediate_size=cfg.hidden_size * 2, num_hidden_layers=cfg.layers,
                         num_attention_heads=cfg.heads, num_key_value_heads=cfg.heads,
                         max_position_embeddings=cfg.pack_len * 2, bos_token_id=BOS_ID,
                         eos_token_id=EOS_ID, pad_token_id=PAD_ID)
    model = LlamaForCausalLM(config).to(DTYPES[cfg.dtype]).eval()
    return model


@torch.no_grad()
def evaluate(model, rows, cfg: EvalConfig) -> float:
    total, count = 0.0, 0
    for i in range(0, len(rows), cfg.batch_size):
        batch = add_bos(collate(rows[i:i + cfg.batch_size]))
        labels = make_labels(batch)
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    labels=labels)
        n = int((labels[:, 1:] != -100).sum())
        total += out.loss.float().item() * n
        count += n
        logger.info("batch %d: loss %.4f over %d tokens", i // cfg.batch_size, out.loss.item(), n)
    return total / max(count, 1)


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    cfg = parse_args()
    torch.set_num_threads(1)
    docs = synthetic_documents(cfg)
    rows = pack(docs, cfg.pack_len)
    logger.info("%d documents packed into %d rows of %d", len(docs), len(rows), cfg.pack_len)
    model = build_model(cfg)
    logger.info("model dtype %s, %d params", next(model.parameters()).dtype,
                sum(p.numel() for p in model.parameters()))
    loss = evaluate(model, rows, cfg)
    logger.info("packed eval loss %.4f ppl %.2f", loss, math.exp(loss))


if __name__ == "__main__":
    main()
