"""Fine-tune a tiny OPT on release-note snippets with the HF Trainer, and print sample
completions after every evaluation so we can eyeball the style as it trains.

    python trainer_opt_sample_callback.py --epochs 2
"""
import argparse
import logging
import shutil
import tempfile

import torch
from torch.utils.data import Dataset
from transformers import (OPTConfig, OPTForCausalLM, Trainer, TrainerCallback, TrainingArguments,
                          set_seed)

logger = logging.getLogger("notes-lm")

NOTES = [
    "fixed a crash when the config file is empty .",
    "added a dark mode toggle to the settings page .",
    "the export button now respects the selected date range .",
    "improved start up time on older phones .",
    "removed the deprecated sync endpoint .",
    "fixed wrong totals in the monthly report .",
    "added keyboard shortcuts for the editor .",
    "the search box now remembers the last query .",
    "fixed a memory leak in the image viewer .",
    "added support for right to left languages .",
]
PROMPTS = ["fixed a", "added support", "the export"]

MODEL = dict(hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
             word_embed_proj_dim=32, max_position_embeddings=64, dropout=0.0,
             attention_dropout=0.0)

TRAIN_ARGS = {
    "per_device_train_batch_size": 4,
    "per_device_eval_batch_size": 4,
    "learning_rate": 3e-3,
    "eval_strategy": "epoch",
    "logging_steps": 1,
    "save_strategy": "no",
    "report_to": [],
    "use_cpu": True,
    "dataloader_num_workers": 0,
    "disable_tqdm": True,
}

# contrastive search (the "less repetitive than greedy" settings from the blog post we follow)
SAMPLE_GEN = {"max_new_tokens": 12, "penalty_alpha": 0.6, "top_k": 4}


class WordTokenizer:
    """Whitespace tokenizer over the notes (the real one is not ready yet)."""

    def __init__(self, texts):
        self.vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
        for t in texts:
            for w in t.split():
                self.vocab.setdefault(w, len(self.vocab))
        self.inv = {i: w for w, i in self.vocab.items()}
        self.pad_token_id, self.eos_token_id = 0, 1

    def encode(self, text):
        return [self.eos_token_id] + [self.vocab.get(w, 2) for w in text.split()]

    def decode(self, ids):
        return " ".join(self.inv[i] for i in ids if i > 2)


class NotesDataset(Dataset):
    def __init__(self, texts, tok, max_len=16):
        self.rows = []
        for t in texts:
            ids = tok.encode(t)[:max_len]
            pad = max_len - len(ids)
            self.rows.append({
                "input_ids": torch.tensor(ids + [tok.pad_token_id] * pad),
                "attention_mask": torch.tensor([1] * len(ids) + [0] * pad),
                "labels": torch.tensor(ids + [-100] * pad),
            })

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


class SampleCallback(TrainerCallback):
    """After each evaluation, complete a few prompts and log them."""

    def __init__(self, tok, prompts, gen_kwargs):
        self.tok, self.prompts, self.gen_kwargs = tok, prompts, gen_kwargs

    def on_evaluate(self, args, state, control, model=None, **kwargs):
        model.eval()
        for prompt in self.prompts:
            ids = torch.tensor([self.tok.encode(prompt)])
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                     pad_token_id=self.tok.pad_token_id, **self.gen_kwargs)
            logger.info("epoch %.1f | %s -> %s", state.epoch, prompt,
                        self.tok.decode(out[0, ids.shape[1]:].tolist()))
        model.train()


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=float, default=2)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--eval-split", type=int, default=8)
    return ap.parse_args()


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    set_seed(args.seed)
    tok = WordTokenizer(NOTES)
    train_ds = NotesDataset(NOTES[: args.eval_split], tok)
    eval_ds = NotesDataset(NOTES[args.eval_split:], tok)
    config = OPTConfig(vocab_size=len(tok.vocab), pad_token_id=0, bos_token_id=1, eos_token_id=1,
                       **MODEL)
    model = OPTForCausalLM(config)
    out_dir = tempfile.mkdtemp(prefix="notes-lm-")
    try:
        training_args = TrainingArguments(output_dir=out_dir, num_train_epochs=args.epochs,
                                          seed=args.seed, **TRAIN_ARGS)
        trainer = Trainer(model=model, args=training_args, train_dataset=train_ds,
                          eval_dataset=eval_ds,
                          callbacks=[SampleCallback(tok, PROMPTS, SAMPLE_GEN)])
        result = trainer.train()
        logger.info("train loss %.4f", result.training_loss)
        metrics = trainer.evaluate()
        logger.info("final eval loss %.4f", metrics["eval_loss"])
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
