"""Quiz answer picker: ALBERT multiple choice fine-tuned with Accelerate on our product-FAQ quiz.

Each question has four candidate answers; every (question, answer) pair is encoded with our word
vocabulary as [CLS] question [SEP] answer [SEP] and padded to a fixed length.

    accelerate launch --cpu --num_processes 1 accel_albert_quiz_choice.py --epochs 2
"""
import argparse
import logging
import random

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, Dataset
from transformers import AlbertConfig, AlbertForMultipleChoice, get_cosine_schedule_with_warmup

logger = logging.getLogger("quiz-choice")

MODEL = {
    "embedding_size": 16,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
    "classifier_dropout_prob": 0.0,
}

QUIZ = [
    ("how long is the warranty", ["two years", "one week", "ten years", "no warranty"], 0),
    ("which port charges the laptop", ["the hdmi port", "the usb c port", "the audio jack", "none"], 1),
    ("how do i reset the router", ["unplug the fridge", "call the bank", "hold the reset button",
                                   "buy a new one"], 2),
    ("where is the serial number", ["on the box only", "in the manual", "on the screen",
                                    "under the battery"], 3),
    ("what colour is the status light when charging", ["orange", "blue", "green", "red"], 0),
    ("can i return an opened item", ["never", "yes within thirty days", "only on mondays",
                                     "only in store"], 1),
    ("how do i pair the headphones", ["shake them", "open the case lid", "hold the power button",
                                      "charge them"], 2),
    ("what does a blinking red light mean", ["all good", "updating", "low volume",
                                             "battery is empty"], 3),
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--max-len", type=int, default=16)
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--eval-questions", type=int, default=2)
    return p.parse_args()


def build_vocab(quiz):
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for question, answers, _ in quiz:
        for w in " ".join([question] + answers).split():
            vocab.setdefault(w, len(vocab))
    return vocab


def encode_pair(question, answer, vocab, max_len):
    ids = ([vocab["[CLS]"]] + [vocab.get(w, 1) for w in question.split()] + [vocab["[SEP]"]]
           + [vocab.get(w, 1) for w in answer.split()] + [vocab["[SEP]"]])
    ids = ids[:max_len]
    return ids + [vocab["[PAD]"]] * (max_len - len(ids))


class QuizDataset(Dataset):
    def __init__(self, quiz, vocab, max_len):
        self.rows = [([encode_pair(q, a, vocab, max_len) for a in answers], label)
                     for q, answers, label in quiz]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def collate(batch):
    # one row per (question, answer) pair, like the cross-encoder we had before
    pairs = [pair for choices, _ in batch for pair in choices]
    input_ids = torch.tensor(pairs, dtype=torch.long)
    return {"input_ids": input_ids,
            "attention_mask": (input_ids != 0).long(),
            "labels": torch.tensor([label for _, label in batch], dtype=torch.long)}


@torch.no_grad()
def accuracy(model, loader, accelerator):
    model.eval()
    hits = seen = 0
    for batch in loader:
        logits = model(**batch).logits
        preds, labels = accelerator.gather_for_metrics((logits.argmax(-1), batch["labels"]))
        hits += (preds == labels).sum().item()
        seen += labels.numel()
    model.train()
    return hits / max(seen, 1)


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    accelerator = Accelerator(cpu=True)
    set_seed(args.seed)

    quiz = list(QUIZ)
    random.Random(args.seed).shuffle(quiz)
    vocab = build_vocab(quiz)
    train_q, eval_q = quiz[args.eval_questions:], quiz[: args.eval_questions]
    train_dl = DataLoader(QuizDataset(train_q, vocab, args.max_len), batch_size=args.batch_size,
                          shuffle=True, collate_fn=collate)
    eval_dl = DataLoader(QuizDataset(eval_q, vocab, args.max_len), batch_size=args.batch_size,
                         collate_fn=collate)

    model = AlbertForMultipleChoice(AlbertConfig(vocab_size=len(vocab), **MODEL))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    total_steps = args.epochs * len(train_dl)
    scheduler = get_cosine_schedule_with_warmup(optimizer, max(1, total_steps // 10), total_steps)
    model, optimizer, train_dl, eval_dl, scheduler = accelerator.prepare(
        model, optimizer, train_dl, eval_dl, scheduler)
    logger.info("%d train / %d eval questions, %d steps on %s", len(train_q), len(eval_q),
                total_steps, accelerator.device)

    for epoch in range(args.epochs):
        running = 0.0
        for batch in train_dl:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            running += loss.item()
        acc = accuracy(model, eval_dl, accelerator)
        logger.info("epoch %d loss %.4f eval accuracy %.2f", epoch, running / len(train_dl), acc)

    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        logger.info("done: %d parameters",
                    sum(p.numel() for p in accelerator.unwrap_model(model).parameters()))
    accelerator.end_training()


if __name__ == "__main__":
    main()
