"""Fine-tune a LoRA adapter on Gemma 4 (tiny, CPU-only reproduction of a real failure).

This is the bundled example that reprobot's README runs first:

    reprobot reduce examples/cpu_gemma4_lora/train_lora.py

It is written the way real training scripts are: argparse, logging, config presets in
registries, a dataset, a trainer class and a loop. The model is a tiny Gemma 4 built from
a config (no download, a few seconds on a laptop CPU). With the default arguments it
fails the way broad-target Gemma 4 LoRA runs fail in the wild (PEFT issue #3129): the
vision tower wraps its projections in ``Gemma4ClippableLinear``, which matches
``target_modules=["q_proj", ...]`` but is not a layer type PEFT can wrap:

    ValueError: Target module Gemma4ClippableLinear(...) is not supported. ...

Expected failure: ``get_peft_model(model, lora_config)`` inside ``attach_adapter``.
Everything after that call (the trainer, the loop, saving) never runs.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import (
    Gemma4AudioConfig,
    Gemma4Config,
    Gemma4ForConditionalGeneration,
    Gemma4TextConfig,
    Gemma4VisionConfig,
)

logger = logging.getLogger("train_lora")

SEED = 1234
PAD_ID = 0
BOS_ID = 2
DEFAULT_OUTPUT_DIR = "runs/gemma4-lora"
LOG_EVERY = 5

# Model presets: what the real run loads from the Hub, shrunk so that it builds on a CPU.
MODEL_PRESETS: dict[str, dict] = {
    "gemma4-tiny": {
        "text": {
            "vocab_size": 128,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 4,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "vocab_size_per_layer_input": 128,
            "hidden_size_per_layer_input": 16,
            "num_kv_shared_layers": 2,
            "sliding_window": 32,
            "layer_types": ["sliding_attention", "full_attention",
                            "sliding_attention", "full_attention"],
        },
        "vision": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "use_clipped_linears": True,
        },
        "audio": {
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "output_proj_dims": 32,
        },
    },
    "gemma4-tiny-text": {
        "text": {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128,
                 "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
                 "head_dim": 32},
        "vision": None,
        "audio": None,
    },
}

# Which projections get adapters. "attn_mlp" is what most Gemma 3 recipes used.
LORA_TARGETS: dict[str, list[str] | str] = {
    "attn": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "attn_mlp": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "minimal": ["q_proj", "v_proj"],
    # The work-around from the forum thread: the text tower's plain projections, and the
    # inner layer of the vision/audio towers' clippable wrappers (a regex, as PEFT allows).
    "inner_linear": r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj)|.*\.(q_proj|k_proj|v_proj|o_proj)\.linear",
}

LORA_DEFAULTS = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "bias": "none"}


@dataclass
class TrainConfig:
    preset: str = "gemma4-tiny"
    targets: str = "attn_mlp"
    rank: int = 16
    alpha: int = 32
    learning_rate: float = 2e-4
    warmup_steps: int = 2
    max_steps: int = 20
    batch_size: int = 4
    seq_len: int = 16
    grad_clip: float = 1.0
    output_dir: str = DEFAULT_OUTPUT_DIR
    tags: list[str] = field(default_factory=lambda: ["gemma4", "lora", "cpu"])


class ToyInstructionDataset(torch.utils.data.Dataset):
    """Random token sequences standing in for a tokenised instruction dataset."""

    def __init__(self, n_examples: int, seq_len: int, vocab_size: int, seed: int = SEED):
        gen = torch.Generator().manual_seed(seed)
        self.examples = [torch.randint(3, vocab_size, (seq_len,), generator=gen) for _ in range(n_examples)]

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, idx: int) -> dict[str, torch.Tensor]:
        ids = self.examples[idx].clone()
        ids[0] = BOS_ID
        return {"input_ids": ids, "labels": ids.clone()}


def collate(batch: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    input_ids = torch.stack([b["input_ids"] for b in batch])
    return {"input_ids": input_ids, "labels": torch.stack([b["labels"] for b in batch]),
            "attention_mask": (input_ids != PAD_ID).long()}


def set_seed(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)


def build_model(preset_name: str) -> Gemma4ForConditionalGeneration:
    preset = MODEL_PRESETS[preset_name]
    text_config = Gemma4TextConfig(**preset["text"])
    vision_config = Gemma4VisionConfig(**preset["vision"]) if preset["vision"] else None
    audio_config = Gemma4AudioConfig(**preset["audio"]) if preset["audio"] else None
    config = Gemma4Config(text_config=text_config, vision_config=vision_config, audio_config=audio_config)
    logger.info("building %s from config (no download)", preset_name)
    return Gemma4ForConditionalGeneration(config)


def count_parameters(model: torch.nn.Module) -> tuple[int, int]:
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return total, trainable


def make_lora_config(cfg: TrainConfig) -> LoraConfig:
    options = dict(LORA_DEFAULTS)
    options.update(r=cfg.rank, lora_alpha=cfg.alpha)
    targets = LORA_TARGETS[cfg.targets]
    logger.info("LoRA targets: %s", targets if isinstance(targets, str) else ", ".join(targets))
    return LoraConfig(target_modules=targets, task_type="CAUSAL_LM", **options)


def attach_adapter(model: torch.nn.Module, lora_config: LoraConfig) -> torch.nn.Module:
    peft_model = get_peft_model(model, lora_config)
    peft_model.print_trainable_parameters()
    return peft_model


def cosine_schedule(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return (step + 1) / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


class Trainer:
    def __init__(self, model: torch.nn.Module, cfg: TrainConfig, dataset: ToyInstructionDataset):
        self.model = model
        self.cfg = cfg
        self.loader = torch.utils.data.DataLoader(dataset, batch_size=cfg.batch_size, shuffle=True,
                                                  collate_fn=collate)
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: cosine_schedule(s, cfg.warmup_steps, cfg.max_steps))
        self.history: list[dict[str, float]] = []

    def train_step(self, batch: dict[str, torch.Tensor]) -> float:
        self.model.train()
        out = self.model(**batch)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(out.loss.detach())

    @torch.no_grad()
    def evaluate(self, batches: int = 2) -> float:
        self.model.eval()
        losses = []
        for i, batch in enumerate(self.loader):
            if i >= batches:
                break
            losses.append(float(self.model(**batch).loss))
        return sum(losses) / max(1, len(losses))

    def train(self) -> list[dict[str, float]]:
        step = 0
        start = time.time()
        while step < self.cfg.max_steps:
            for batch in self.loader:
                loss = self.train_step(batch)
                self.history.append({"step": step, "loss": loss, "lr": self.scheduler.get_last_lr()[0]})
                if step % LOG_EVERY == 0:
                    logger.info("step %d loss %.4f (%.1fs)", step, loss, time.time() - start)
                step += 1
                if step >= self.cfg.max_steps:
                    break
        return self.history

    def save(self, output_dir: str) -> Path:
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(out)
        (out / "history.json").write_text(json.dumps(self.history, indent=2))
        (out / "train_config.json").write_text(json.dumps(asdict(self.cfg), indent=2))
        return out


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="gemma4-tiny", choices=sorted(MODEL_PRESETS))
    parser.add_argument("--targets", default="attn_mlp", choices=sorted(LORA_TARGETS))
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--alpha", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT_DIR)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return TrainConfig(preset=args.preset, targets=args.targets, rank=args.rank, alpha=args.alpha,
                       learning_rate=args.lr, max_steps=args.max_steps, batch_size=args.batch_size,
                       output_dir=args.output_dir)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    logger.info("config: %s", json.dumps(asdict(cfg)))
    set_seed(SEED)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))

    model = build_model(cfg.preset)
    total, _ = count_parameters(model)
    logger.info("base model: %.2fM parameters", total / 1e6)

    dataset = ToyInstructionDataset(32, cfg.seq_len, model.config.text_config.vocab_size)
    lora_config = make_lora_config(cfg)
    model = attach_adapter(model, lora_config)
    total, trainable = count_parameters(model)
    logger.info("trainable %d / %d (%.2f%%)", trainable, total, 100.0 * trainable / total)

    trainer = Trainer(model, cfg, dataset)
    history = trainer.train()
    logger.info("eval loss %.4f", trainer.evaluate())
    out = trainer.save(cfg.output_dir)
    logger.info("saved adapter to %s after %d steps", out, len(history))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
