"""Science-quiz answer picker: a tiny DeBERTa-v2 multiple-choice head trained on a toy quiz.

Each question has four options. Our preprocessing encodes option k for the whole batch at once
(one tensor per option column, the way the old feature pipeline laid them out), stacks the option
columns, and swaps the axes into the [batch, options, tokens] layout the model wants.

    python mc_deberta_science_quiz.py --epochs 3 --batch-size 2
"""
import argparse
import logging
import random
import time

import torch
from transformers import DebertaV2Config, DebertaV2ForMultipleChoice, get_linear_schedule_with_warmup

log = logging.getLogger("quiz")

QUIZ = [
    ("what do plants need to make food", ["sunlight", "sand", "plastic", "noise"], 0),
    ("which planet is closest to the sun", ["mars", "mercury", "jupiter", "neptune"], 1),
    ("what gas do humans breathe out", ["oxygen", "helium", "carbon dioxide", "neon"], 2),
    ("water freezes at how many degrees celsius", ["ten", "fifty", "hundred", "zero"], 3),
    ("what force pulls objects toward the earth", ["gravity", "magnetism", "friction", "wind"], 0),
    ("which organ pumps blood", ["lung", "heart", "liver", "skin"], 1),
    ("what is the boiling point of water in celsius", ["zero", "fifty", "hundred", "ten"], 2),
    ("which animal is a mammal", ["shark", "eagle", "frog", "whale"], 3),
]
ARCH = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64, relative_attention=True, position_buckets=16,
            pos_att_type=["p2c", "c2p"], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--max-len", type=int, default=16)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def build_vocab():
    vocab = {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[UNK]": 3}
    for q, opts, _ in QUIZ:
        for w in (q + " " + " ".join(opts)).split():
            vocab.setdefault(w, len(vocab))
    return vocab


def encode_pair(question, option, vocab, max_len):
    ids = [1] + [vocab.get(w, 3) for w in question.split()] + [2] + [vocab.get(w, 3) for w in option.split()] + [2]
    ids = ids[:max_len]
    return ids + [0] * (max_len - len(ids))


def encode_option_column(batch, k, vocab, max_len):
    """Option k of every question in the batch -> [batch, max_len]."""
    return torch.tensor([encode_pair(q, opts[k], vocab, max_len) for q, opts, _ in batch])


def collate(batch, vocab, max_len):
    n_opts = len(batch[0][1])
    cols = torch.stack([encode_option_column(batch, k, vocab, max_len) for k in range(n_opts)])  # [opts, B, L]
    input_ids = cols.transpose(0, 1)  # -> [B, opts, L]
    return {"input_ids": input_ids, "attention_mask": (input_ids != 0).long(),
            "labels": torch.tensor([ans for _, _, ans in batch])}


def evaluate(model, data, vocab, args):
    model.eval()
    hit = 0
    with torch.no_grad():
        for i in range(0, len(data), args.batch_size):
            batch = collate(data[i:i + args.batch_size], vocab, args.max_len)
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            hit += (logits.argmax(-1) == batch["labels"]).sum().item()
    return hit / len(data)


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    vocab = build_vocab()
    model = DebertaV2ForMultipleChoice(DebertaV2Config(vocab_size=len(vocab), pad_token_id=0, **ARCH))
    train_data, dev_data = QUIZ[:6], QUIZ[6:]
    steps = args.epochs * ((len(train_data) + args.batch_size - 1) // args.batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, args.warmup, steps)
    log.info("%d params, %d steps", sum(p.numel() for p in model.parameters()), steps)
    for epoch in range(args.epochs):
        model.train()
        random.shuffle(train_data)
        t0, total = time.time(), 0.0
        for i in range(0, len(train_data), args.batch_size):
            batch = collate(train_data[i:i + args.batch_size], vocab, args.max_len)
            out = model(**batch)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            total += out.loss.item()
        log.info("epoch %d loss %.4f dev acc %.2f (%.1fs)", epoch, total, evaluate(model, dev_data, vocab, args),
                 time.time() - t0)


if __name__ == "__main__":
    main()
