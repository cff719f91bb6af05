"""Fine-tune a small GPT-2 on commit messages with the Trainer, configured from the command line.

Run as `python script.py --output_dir runs/commits --lr_scheduler_type cosine_with_min_lr
--lr_scheduler_kwargs '{"min_lr": 1e-06}' ...`; with no arguments it uses the launch line the
team's job file passes (DEFAULT_LAUNCH). Arguments are parsed with HfArgumentParser into our own
dataclass plus TrainingArguments. A tiny GPT-2 built from a config stands in for the checkpoint
and the commit messages are written in code.
"""
import logging
import random
import sys
from dataclasses import dataclass, field

import torch
from transformers import GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer, TrainingArguments

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("commit-lm")

DEFAULT_LAUNCH = [
    "--output_dir", "runs/commit-lm",
    "--num_train_epochs", "2",
    "--per_device_train_batch_size", "4",
    "--learning_rate", "3e-3",
    "--lr_scheduler_type", "cosine_with_min_lr",
    "--lr_scheduler_kwargs", '{"min_lr": 1e-06}',
    "--warmup_steps", "2",
    "--logging_steps", "2",
    "--save_strategy", "no",
    "--report_to", "none",
    "--use_cpu",
]
VERBS = ["fix", "add", "remove", "update", "refactor"]
OBJECTS = ["the parser", "a test for the loader", "unused imports", "the docs", "the cache layer"]


@dataclass
class DataArguments:
    n_examples: int = field(default=40, metadata={"help": "commit messages to generate"})
    max_length: int = field(default=12, metadata={"help": "tokens per message"})
    n_layer: int = field(default=2, metadata={"help": "layers of the tiny model"})
    seed_data: int = field(default=7, metadata={"help": "seed for the generated messages"})


class CommitDataset(torch.utils.data.Dataset):
    def __init__(self, messages, vocab, max_length):
        self.rows = []
        for msg in messages:
            ids = [vocab["<bos>"]] + [vocab[w] for w in msg.split()] + [vocab["<eos>"]]
            ids = ids[:max_length] + [vocab["<pad>"]] * max(0, max_length - len(ids))
            ids = torch.tensor(ids)
            mask = (ids != vocab["<pad>"]).long()
            self.rows.append({"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)})

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def make_messages(n, seed):
    rng = random.Random(seed)
    return [f"{rng.choice(VERBS)} {rng.choice(OBJECTS)}" for _ in range(n)]


def build_vocab(messages):
    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2}
    for msg in messages:
        for w in msg.split():
            vocab.setdefault(w, len(vocab))
    return vocab


def parse():
    # exit_on_error=False: a bad flag raises, so the job runner's log keeps the traceback
    parser = HfArgumentParser((DataArguments, TrainingArguments), exit_on_error=False)
    argv = sys.argv[1:] or DEFAULT_LAUNCH
    data_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    return data_args, training_args


def main():
    data_args, training_args = parse()
    log.info("scheduler %s with %s", training_args.lr_scheduler_type, training_args.lr_scheduler_kwargs)
    messages = make_messages(data_args.n_examples, data_args.seed_data)
    vocab = build_vocab(messages)
    dataset = CommitDataset(messages, vocab, data_args.max_length)
    config = GPT2Config(vocab_size=len(vocab), n_positions=32, n_embd=32, n_layer=data_args.n_layer, n_head=2,
                        bos_token_id=vocab["<bos>"], eos_token_id=vocab["<eos>"], pad_token_id=vocab["<pad>"])
    model = GPT2LMHeadModel(config)
    trainer = Trainer(model=model, args=training_args, train_dataset=dataset)
    result = trainer.train()
    log.info("done: loss %.3f after %d steps", result.training_loss, result.global_step)
    log.info("last learning rates: %s", [h["learning_rate"] for h in trainer.state.log_history if "learning_rate" in h][-3:])


if __name__ == "__main__":
    main()
