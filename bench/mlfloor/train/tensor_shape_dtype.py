"""Prefix-tuning style conditioning: a small float32 projector maps an external feature vector
(e.g. an image or retrieval embedding) to K soft-prompt vectors that are prepended to the token
embeddings of a bfloat16 causal LM, then the LM is run on inputs_embeds.
"""
from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass, field

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

log = logging.getLogger("prefix")

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class Settings:
    lm_dtype: str = "bf16"
    feature_dim: int = 24
    n_prefix: int = 4
    batch_size: int = 2
    seq_len: int = 6
    seed: int = 5
    lm: dict = field(default_factory=lambda: dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=100, max_position_embeddings=64))


class PrefixProjector(nn.Module):
    def __init__(self, feature_dim: int, hidden: int, n_prefix: int):
        super().__init__()
        self.n_prefix = n_prefix
        self.hidden = hidden
        self.net = nn.Sequential(nn.Linear(feature_dim, hidden * 2), nn.GELU(),
                                 nn.Linear(hidden * 2, hidden * n_prefix))

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.net(feats).view(feats.size(0), self.n_prefix, self.hidden)


class ConditionedLM(nn.Module):
    def __init__(self, settings: Settings):
        super().__init__()
        self.lm = LlamaForCausalLM(LlamaConfig(**settings.lm)).to(DTYPES[settings.lm_dtype])
        self.projector = PrefixProjector(settings.feature_dim, settings.lm["hidden_size"], settings.n_prefix)
        for p in self.lm.parameters():
            p.requires_grad_(False)

    def forward(self, input_ids, feats, attention_mask=None):
        tok_embeds = self.lm.get_input_embeddings()(input_ids)
        prefix = self.projector(feats)
        embeds = torch.cat([prefix, tok_embeds.to(prefix.dtype)], dim=1)
        if attention_mask is not None:
            ones = attention_mask.new_ones(attention_mask.size(0), prefix.size(1))
            attention_mask = torch.cat([ones, attention_mask], dim=1)
        return self.lm(inputs_embeds=embeds, attention_mask=attention_mask)


def parse_args() -> Settings:
    p = argparse.ArgumentParser()
    p.add_argument("--lm-dtype", default="bf16", choices=list(DTYPES))
    p.add_argument("--n-prefix", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--seed", type=int, default=5)
    a = p.parse_args()
    return Settings(lm_dtype=a.lm_dtype, n_prefix=a.n_prefix, batch_size=a.batch_size, seed=a.seed)


def make_batch(s: Settings):
    g = torch.Generator().manual_seed(s.seed)
    ids = torch.randint(1, s.lm["vocab_size"], (s.batch_size, s.seq_len), generator=g)
    mask = torch.ones_like(ids)
    feats = torch.randn(s.batch_size, s.feature_dim, generator=g)
    return ids, mask, feats


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    s = parse_args()
    torch.manual_seed(s.seed)
    model = ConditionedLM(s).eval()
    ids, mask, feats = make_batch(s)
    log.info("lm dtype %s, projector dtype %s", next(model.lm.parameters()).dtype,
             next(model.projector.parameters()).dtype)
    with torch.no_grad():
        out = model(ids, feats, attention_mask=mask)
    log.info("logits %s %s", tuple(out.logits.shape), out.logits.dtype)


if __name__ == "__main__":
    main()
