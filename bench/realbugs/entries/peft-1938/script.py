"""Prefix-tune the language half of a small captioning model (Llava-style: image patches are
projected into the token embedding space and prepended to the caption).

Only the prefix is trained: the projector and the language model stay frozen. Image features are
synthetic (one mean vector per shape class plus noise) and captions come from templates, so the
whole run is offline and takes a few seconds on a CPU.
"""
import argparse
import logging
import random

import torch
from torch import nn
from peft import PrefixTuningConfig, TaskType, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("caption-prefix")

CONFIG = {
    "vision_dim": 24,
    "num_patches": 4,
    "hidden_size": 32,
    "layers": 2,
    "heads": 4,
    "prefix_tokens": 6,
    "lr": 3e-3,
}
SHAPES = ["circle", "square", "triangle"]
COLOURS = ["red", "green", "blue"]
WORDS = ["<pad>", "<s>", "</s>", "a", "an", "image", "of", "small", "large"] + SHAPES + COLOURS


class CaptionModel(nn.Module):
    """Vision projector + language model, called the way Llava calls its language model."""

    def __init__(self, language_model, vision_dim, hidden_size):
        super().__init__()
        self.projector = nn.Sequential(nn.Linear(vision_dim, hidden_size), nn.GELU(), nn.Linear(hidden_size, hidden_size))
        self.language_model = language_model

    def forward(self, patches, input_ids, attention_mask, labels=None, past_key_values=None, use_cache=None):
        image_embeds = self.projector(patches)
        token_embeds = self.language_model.get_input_embeddings()(input_ids)
        inputs_embeds = torch.cat([image_embeds, token_embeds], dim=1)
        image_mask = torch.ones(patches.shape[:2], dtype=attention_mask.dtype)
        attention_mask = torch.cat([image_mask, attention_mask], dim=1)
        if labels is not None:
            labels = torch.cat([torch.full(patches.shape[:2], -100, dtype=labels.dtype), labels], dim=1)
        return self.language_model(inputs_embeds=inputs_embeds, attention_mask=attention_mask, labels=labels,
                                   past_key_values=past_key_values, use_cache=use_cache)


def make_examples(n, rng, cfg):
    centres = {s: torch.randn(cfg["vision_dim"], generator=torch.Generator().manual_seed(i)) for i, s in enumerate(SHAPES)}
    rows = []
    for _ in range(n):
        shape, colour, size = rng.choice(SHAPES), rng.choice(COLOURS), rng.choice(["small", "large"])
        patches = centres[shape] + 0.1 * torch.randn(cfg["num_patches"], cfg["vision_dim"])
        caption = f"<s> an image of a {size} {colour} {shape} </s>".split()
        rows.append((patches, [WORDS.index(w) for w in caption]))
    return rows


def collate(rows):
    width = max(len(ids) for _, ids in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, (_, toks) in enumerate(rows):
        ids[i, :len(toks)] = torch.tensor(toks)
        mask[i, :len(toks)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return torch.stack([p for p, _ in rows]), ids, mask, labels


def build_model(cfg):
    lm_config = LlamaConfig(vocab_size=len(WORDS), hidden_size=cfg["hidden_size"], intermediate_size=64,
                            num_hidden_layers=cfg["layers"], num_attention_heads=cfg["heads"],
                            num_key_value_heads=cfg["heads"], max_position_embeddings=64,
                            pad_token_id=0, bos_token_id=1, eos_token_id=2)
    language_model = LlamaForCausalLM(lm_config)
    prefix = PrefixTuningConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=cfg["prefix_tokens"])
    language_model = get_peft_model(language_model, prefix)
    language_model.print_trainable_parameters()
    model = CaptionModel(language_model, cfg["vision_dim"], cfg["hidden_size"])
    for p in model.projector.parameters():
        p.requires_grad_(False)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=48)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)

    data = make_examples(args.examples, rng, CONFIG)
    model = build_model(CONFIG)
    optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=CONFIG["lr"])
    model.train()
    for epoch in range(args.epochs):
        rng.shuffle(data)
        total = 0.0
        for start in range(0, len(data), args.batch_size):
            patches, ids, mask, labels = collate(data[start:start + args.batch_size])
            out = model(patches, ids, mask, labels=labels)
            out.loss.backward()
            optim.step()
            optim.zero_grad()
            total += out.loss.item()
        log.info("epoch %d loss %.4f", epoch, total / max(1, len(data) // args.batch_size))
    log.info("done")


if __name__ == "__main__":
    main()
