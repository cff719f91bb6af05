"""Tiny causal-LM fine-tune with the HF Trainer and two custom callbacks.

A LossSpikeCallback watches the logged loss and, when it jumps, asks the Trainer for an
evaluation right away (instead of waiting for the eval schedule); a TimingCallback logs step
times. The dataset is a handful of synthetic token sequences.
"""
from __future__ import annotations

import logging
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch.utils.data import Dataset
from transformers import (GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback,
                          TrainingArguments)

log = logging.getLogger("finetune")


@dataclass
class RunConfig:
    vocab_size: int = 64
    n_layer: int = 2
    n_embd: int = 32
    n_head: int = 2
    seq_len: int = 12
    n_train: int = 16
    n_eval: int = 0          # no held-out split for this quick run
    max_steps: int = 3
    batch_size: int = 4
    lr: float = 1e-3
    spike_ratio: float = 0.0  # any increase counts as a spike while debugging
    seed: int = 3
    tags: list = field(default_factory=lambda: ["debug", "cpu"])


class SyntheticLM(Dataset):
    def __init__(self, n, seq_len, vocab_size, seed):
        rng = random.Random(seed)
        self.rows = [[rng.randrange(1, vocab_size) for _ in range(seq_len)] for _ in range(n)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids = torch.tensor(self.rows[i])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


class LossSpikeCallback(TrainerCallback):
    """Request an evaluation as soon as the training loss goes up by more than `ratio`."""

    def __init__(self, ratio: float):
        self.ratio = ratio
        self.best = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        loss = (logs or {}).get("loss")
        if loss is None:
            return
        if self.best is not None and loss >= self.best * (1 + self.ratio):
            log.warning("loss spike at step %d: %.4f (best %.4f), evaluating", state.global_step, loss, self.best)
            control.should_evaluate = True
        self.best = loss if self.best is None else min(self.best, loss)


class TimingCallback(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        self._t0 = time.time()

    def on_step_end(self, args, state, control, **kwargs):
        log.info("step %d took %.3fs", state.global_step, time.time() - self._t0)


def build_model(cfg: RunConfig) -> GPT2LMHeadModel:
    torch.manual_seed(cfg.seed)
    return GPT2LMHeadModel(GPT2Config(vocab_size=cfg.vocab_size, n_layer=cfg.n_layer,
                                      n_embd=cfg.n_embd, n_head=cfg.n_head, n_positions=32,
                                      bos_token_id=0, eos_token_id=0))


def build_args(cfg: RunConfig, out_dir: str) -> TrainingArguments:
    return TrainingArguments(
        output_dir=out_dir, max_steps=cfg.max_steps, per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.lr, logging_steps=1, save_strategy="no", eval_strategy="no",
        report_to=[], use_cpu=True, seed=cfg.seed, disable_tqdm=True,
        dataloader_num_workers=0,
    )


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    cfg = RunConfig()
    train_ds = SyntheticLM(cfg.n_train, cfg.seq_len, cfg.vocab_size, cfg.seed)
    eval_ds = SyntheticLM(cfg.n_eval, cfg.seq_len, cfg.vocab_size, cfg.seed + 1) if cfg.n_eval else None
    with tempfile.TemporaryDirectory() as out_dir:
        trainer = Trainer(
            model=build_model(cfg), args=build_args(cfg, out_dir),
            train_dataset=train_ds, eval_dataset=eval_ds,
            callbacks=[LossSpikeCallback(cfg.spike_ratio), TimingCallback()],
        )
        result = trainer.train()
        log.info("train loss %.4f after %d steps", result.training_loss, result.global_step)
    return 0


if __name__ == "__main__":
    sys.exit(main())
