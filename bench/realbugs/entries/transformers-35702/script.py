"""Fine-tune a small BERT intent classifier with a hand-written Accelerate loop.

Hyper-parameters are kept in TrainingArguments (parsed from a dict with HfArgumentParser, next to
our own data arguments) so the run shares one config format with the Trainer-based jobs; the loop
itself is plain Accelerate. The Accelerator is created at import time so helpers can log on the
main process only. Utterances are generated from templates and the model is built from a config.

Launch with `accelerate launch script.py` or plain `python script.py`.
"""
import logging
import random
import tempfile
from dataclasses import dataclass, field

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset
from transformers import BertConfig, BertForSequenceClassification, HfArgumentParser, TrainingArguments, get_scheduler

accelerator = Accelerator()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("intents")

RUN_CONFIG = {
    "output_dir": tempfile.mkdtemp(prefix="intents-"),
    "learning_rate": 3e-4,
    "per_device_train_batch_size": 8,
    "num_train_epochs": 2,
    "warmup_steps": 2,
    "lr_scheduler_type": "linear",
    "seed": 11,
    "report_to": "none",
    "n_utterances": 96,
    "max_length": 12,
}
INTENTS = {
    "weather": ["what is the weather in {}", "will it rain in {} tomorrow"],
    "music": ["play some jazz in the {}", "turn up the music in the {}"],
    "alarm": ["wake me up at {}", "set an alarm for {}"],
}
FILLERS = ["paris", "kitchen", "seven", "london", "car", "noon"]


@dataclass
class DataArguments:
    n_utterances: int = field(default=64)
    max_length: int = field(default=12)


class Utterances(Dataset):
    def __init__(self, n, max_length, seed):
        rng = random.Random(seed)
        labels = sorted(INTENTS)
        words = sorted({w for ts in INTENTS.values() for t in ts for w in t.replace("{}", "").split()} | set(FILLERS))
        self.vocab = {w: i + 2 for i, w in enumerate(words)}  # 0 pad, 1 cls
        self.rows = []
        for _ in range(n):
            label = rng.choice(labels)
            text = rng.choice(INTENTS[label]).format(rng.choice(FILLERS))
            ids = [1] + [self.vocab[w] for w in text.split()][: max_length - 1]
            ids = ids + [0] * (max_length - len(ids))
            self.rows.append((torch.tensor(ids), labels.index(label)))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids, label = self.rows[i]
        return {"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": torch.tensor(label)}


def parse_config(cfg):
    parser = HfArgumentParser((DataArguments, TrainingArguments))
    data_args, train_args = parser.parse_dict(cfg)
    return data_args, train_args


def main():
    data_args, train_args = parse_config(RUN_CONFIG)
    torch.manual_seed(train_args.seed)
    dataset = Utterances(data_args.n_utterances, data_args.max_length, train_args.seed)
    loader = DataLoader(dataset, batch_size=train_args.per_device_train_batch_size, shuffle=True)
    config = BertConfig(vocab_size=len(dataset.vocab) + 2, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=len(INTENTS))
    model = BertForSequenceClassification(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=train_args.learning_rate)
    total = int(train_args.num_train_epochs) * len(loader)
    scheduler = get_scheduler(train_args.lr_scheduler_type, optimizer, num_warmup_steps=train_args.warmup_steps,
                              num_training_steps=total)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    model.train()
    for epoch in range(int(train_args.num_train_epochs)):
        running = 0.0
        for batch in loader:
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            running += loss.item()
        if accelerator.is_main_process:
            log.info("epoch %d: mean loss %.4f", epoch, running / len(loader))
    accelerator.wait_for_everyone()
    accelerator.unwrap_model(model).save_pretrained(train_args.output_dir)
    log.info("saved to %s", train_args.output_dir)


if __name__ == "__main__":
    main()
