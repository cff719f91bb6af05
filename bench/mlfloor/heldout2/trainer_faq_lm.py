"""Fine-tune a tiny Qwen2-style causal LM on an in-house FAQ corpus with the HF Trainer.

Hyperparameters live in one dict (so the sweep launcher can override them); the best checkpoint
by validation perplexity is kept and reloaded at the end.

    python trainer_faq_lm.py --output-dir /tmp/faq_lm --max-steps 6
"""
import argparse
import math
import os
import random
import tempfile

import numpy as np
import torch
from torch.utils.data import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, Trainer,
                          TrainingArguments, set_seed)

FAQ = [
    ("how do i reset my password", "open settings then security then reset password"),
    ("can i change my email", "yes open profile and edit the email field"),
    ("why was my card declined", "check the card number and the expiry date"),
    ("how long does shipping take", "shipping takes three to five days"),
    ("can i return an item", "yes within thirty days with the receipt"),
    ("do you ship abroad", "we ship to most countries in europe"),
    ("how do i delete my account", "open settings then privacy then delete account"),
    ("where is my order", "open orders to see the tracking number"),
]

HPARAMS = {
    "learning_rate": 5e-4,
    "per_device_train_batch_size": 4,
    "per_device_eval_batch_size": 4,
    "weight_decay": 0.01,
    "warmup_steps": 1,
    "logging_steps": 1,
    "eval_strategy": "steps",
    "eval_steps": 2,
    "save_strategy": "steps",
    "save_steps": 2,
    "save_total_limit": 1,
    "load_best_model_at_end": True,
    "metric_for_best_model": "perplexity",
    "greater_is_better": False,
    "report_to": "none",
    "use_cpu": True,
    "dataloader_num_workers": 0,
    "disable_tqdm": True,
}


def build_tokenizer():
    words = sorted({w for q, a in FAQ for w in (q + " " + a).split()})
    vocab = {t: i for i, t in enumerate(["<pad>", "<unk>", "<bos>", "<eos>", "<sep>"] + words)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>",
                                   bos_token="<bos>", eos_token="<eos>", sep_token="<sep>")


class FaqDataset(Dataset):
    """question <sep> answer <eos>; the loss is only taken on the answer tokens."""

    def __init__(self, pairs, tokenizer, max_len=32):
        self.items = []
        for q, a in pairs:
            q_ids = tokenizer(q, add_special_tokens=False)["input_ids"]
            a_ids = tokenizer(a, add_special_tokens=False)["input_ids"]
            ids = ([tokenizer.bos_token_id] + q_ids + [tokenizer.sep_token_id] + a_ids
                   + [tokenizer.eos_token_id])[:max_len]
            labels = [-100] * (len(q_ids) + 2) + ids[len(q_ids) + 2:]
            self.items.append({"input_ids": ids, "labels": labels[:len(ids)]})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


class PadCollator:
    def __init__(self, pad_id):
        self.pad_id = pad_id

    def __call__(self, features):
        width = max(len(f["input_ids"]) for f in features)
        batch = {"input_ids": [], "attention_mask": [], "labels": []}
        for f in features:
            n = len(f["input_ids"])
            batch["input_ids"].append(f["input_ids"] + [self.pad_id] * (width - n))
            batch["attention_mask"].append([1] * n + [0] * (width - n))
            batch["labels"].append(f["labels"] + [-100] * (width - n))
        return {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}


def preprocess_logits_for_metrics(logits, labels):
    return logits.argmax(dim=-1)


def compute_metrics(eval_pred):
    preds, labels = eval_pred.predictions, eval_pred.label_ids
    preds, labels = preds[:, :-1], labels[:, 1:]
    keep = labels != -100
    acc = float((preds[keep] == labels[keep]).mean()) if keep.any() else 0.0
    return {"token_accuracy": acc}


class PerplexityTrainer(Trainer):
    def evaluate(self, *args, **kwargs):
        metrics = super().evaluate(*args, **kwargs)
        if "eval_loss" in metrics:
            print(f"  eval ppl ~ {math.exp(min(metrics['eval_loss'], 20)):.2f}")
        return metrics


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output-dir", default=os.path.join(tempfile.gettempdir(), "faq_lm_demo"))
    p.add_argument("--max-steps", type=int, default=6)
    p.add_argument("--seed", type=int, default=13)
    args = p.parse_args()
    set_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)

    tok = build_tokenizer()
    pairs = FAQ[:]
    random.shuffle(pairs)
    train_ds, eval_ds = FaqDataset(pairs[:6], tok), FaqDataset(pairs[6:], tok)

    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      max_position_embeddings=64, pad_token_id=tok.pad_token_id,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = Qwen2ForCausalLM(cfg)

    training_args = TrainingArguments(output_dir=args.output_dir, max_steps=args.max_steps,
                                      seed=args.seed, **HPARAMS)
    trainer = PerplexityTrainer(model=model, args=training_args, train_dataset=train_ds,
                                eval_dataset=eval_ds, data_collator=PadCollator(tok.pad_token_id),
                                processing_class=tok, compute_metrics=compute_metrics,
                                preprocess_logits_for_metrics=preprocess_logits_for_metrics)
    result = trainer.train()
    print(f"train loss {result.training_loss:.4f}, best ckpt {trainer.state.best_model_checkpoint}")
    final = trainer.evaluate()
    print({k: round(v, 4) for k, v in final.items() if isinstance(v, float)})
    trainer.save_model(os.path.join(args.output_dir, "best"))


if __name__ == "__main__":
    main()
