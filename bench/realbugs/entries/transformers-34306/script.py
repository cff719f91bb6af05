"""Fine-tune a sequence classifier on ticket priorities, driven by HfArgumentParser dataclasses.

Run from the shell as `python script.py --model_name_or_path ... --output_dir ...`; in the IDE the
launch configuration supplies the same arguments (LAUNCH below mirrors that configuration).
"""
import sys
from dataclasses import dataclass, field
from typing import Optional

import torch
from transformers import (BertConfig, BertForSequenceClassification, HfArgumentParser, Trainer,
                          TrainingArguments)

# What the IDE's launch configuration passes (written from our YAML run card, keys as they are there).
LAUNCH = {"program": "script.py",
          "args": ["--output_dir", "out", "model_name_or_path", "small-bert", "short_name", "tickets",
                   "--max_seq_length", "32"]}


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default="small-bert", metadata={"help": "checkpoint to start from"})
    short_name: Optional[str] = field(default=None, metadata={"help": "run name suffix"})


@dataclass
class DataArguments:
    max_seq_length: int = field(default=64)
    num_examples: int = field(default=32)


class TicketDataset(torch.utils.data.Dataset):
    def __init__(self, n, seq_len):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(5, 100, (n, seq_len), generator=g)
        self.labels = (self.ids[:, 0] > 50).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]), "labels": self.labels[i]}


def accuracy(eval_pred):
    logits, labels = eval_pred
    return {"accuracy": float((logits.argmax(-1) == labels).mean())}


def main():
    argv = sys.argv[1:] or LAUNCH["args"]
    parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    print("run", model_args.short_name, "from", model_args.model_name_or_path)

    model = BertForSequenceClassification(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=64, num_labels=2))
    ds = TicketDataset(data_args.num_examples, data_args.max_seq_length)
    training_args.report_to = []
    trainer = Trainer(model=model, args=training_args, train_dataset=ds, eval_dataset=ds, compute_metrics=accuracy)
    trainer.train()
    print(trainer.evaluate())


if __name__ == "__main__":
    main()
