"""Fine-tune a small intent classifier for the support bot with plain DDP (gloo / CPU boxes).

Every rank reads its own slice of the labelled utterances and builds its label map from what it
sees, so we do not have to ship a separate labels file with each data drop.

    torchrun --nproc_per_node 2 ddp_intent_classifier.py --epochs 2 --batch-size 4
"""
import argparse
import logging
import os
import time

import torch
import torch.distributed as dist
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(levelname)s] %(message)s")
log = logging.getLogger("intent-ddp")

MODEL_CFG = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0)

UTTERANCES = [
    ("please cancel my order right now", "cancel_order"),
    ("where is my package it is late", "track_order"),
    ("i want my money back for the broken item", "refund"),
    ("how do i reset my password", "account"),
    ("the app crashes when i open it", "bug_report"),
    ("i need a refund for order twelve", "refund"),
    ("can you tell me where my parcel is", "track_order"),
    ("the screen goes black after update", "bug_report"),
    ("i cannot login to my account", "account"),
    ("tracking number does not work", "track_order"),
    ("send my money back please", "refund"),
    ("change the email on my account", "account"),
    ("app freezes on the payment page", "bug_report"),
    ("when will my package arrive", "track_order"),
    ("refund the shipping fee please", "refund"),
    ("delete my account and data", "account"),
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--max-length", type=int, default=16)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--out-dir", default="intent_ckpt")
    return p.parse_args()


def build_tokenizer(texts):
    words = sorted({w for t in texts for w in t.split()})
    vocab = {tok: i for i, tok in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + words)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def load_shard(rank, world_size):
    """Round-robin split of the utterances; each rank only ever sees its own rows."""
    return UTTERANCES[rank::world_size]


def build_label_map(shard):
    labels = sorted({intent for _, intent in shard})
    return {name: i for i, name in enumerate(labels)}


def make_collate(tokenizer, label2id, max_length):
    def collate(rows):
        texts, intents = zip(*rows)
        enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")
        enc["labels"] = torch.tensor([label2id[i] for i in intents])
        return enc
    return collate


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    if rank != 0:
        log.setLevel(logging.WARNING)

    tokenizer = build_tokenizer([t for t, _ in UTTERANCES])
    shard = load_shard(rank, world_size)
    label2id = build_label_map(shard)
    id2label = {i: n for n, i in label2id.items()}
    print(f"[rank {rank}] {len(shard)} utterances, labels={list(label2id)}", flush=True)

    config = BertConfig(vocab_size=len(tokenizer), num_labels=len(label2id), label2id=label2id,
                        id2label=id2label, pad_token_id=tokenizer.pad_token_id, **MODEL_CFG)
    model = BertForSequenceClassification(config)
    model = DDP(model)
    log.info("wrapped model in DDP (%d parameters)", sum(p.numel() for p in model.parameters()))

    loader = DataLoader(shard, batch_size=args.batch_size, shuffle=True,
                        collate_fn=make_collate(tokenizer, label2id, args.max_length))
    optim = torch.optim.AdamW(model.parameters(), lr=args.lr)

    model.train()
    for epoch in range(args.epochs):
        t0, total = time.time(), 0.0
        for step, batch in enumerate(loader):
            out = model(**batch)
            out.loss.backward()
            optim.step()
            optim.zero_grad()
            total += out.loss.item()
        log.info("epoch %d loss %.4f (%.1fs)", epoch, total / max(1, step + 1), time.time() - t0)

    if rank == 0:
        os.makedirs(args.out_dir, exist_ok=True)
        model.module.save_pretrained(args.out_dir)
        tokenizer.save_pretrained(args.out_dir)
        log.info("saved to %s", args.out_dir)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
