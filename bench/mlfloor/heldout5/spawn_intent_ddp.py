"""Fine-tune a small DistilBERT intent classifier on the help-desk export, data parallel on CPU.

The export comes from the labelling tool as CSV text (label column written by pandas, so it
reads "0.0", "1.0", ...). Workers are started with torch.multiprocessing.spawn; how many comes
from INTENT_WORKERS (the cron job sets it per host) or CONFIG["nprocs"].

    INTENT_WORKERS=2 python spawn_intent_ddp.py
"""
import csv
import io
import logging
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler
from transformers import DistilBertConfig, DistilBertForSequenceClassification

CONFIG = {
    "nprocs": 2,
    "epochs": 2,
    "batch_size": 4,
    "max_len": 12,
    "lr": 5e-4,
    "seed": 7,
    "model": {"dim": 32, "n_layers": 2, "n_heads": 4, "hidden_dim": 64, "dropout": 0.0,
              "attention_dropout": 0.0, "max_position_embeddings": 32},
}

INTENTS = ["billing", "shipping", "account"]

EXPORT = """text,label
where is my parcel,1.0
the invoice total is wrong,0.0
i forgot my password,2.0
refund has not arrived yet,0.0
my package shows delivered but it is not here,1.0
change the email on my profile,2.0
why was i charged twice,0.0
can you ship to another country,1.0
delete my account please,2.0
the courier left the box at the wrong door,1.0
update my card details,0.0
two factor code never arrives,2.0
"""

log = logging.getLogger("intent")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_export(text):
    rows = []
    for rec in csv.DictReader(io.StringIO(text)):
        rows.append({"text": rec["text"].strip(), "label": float(rec["label"])})
    return rows


def build_vocab(rows):
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for row in rows:
        for word in row["text"].split():
            vocab.setdefault(word, len(vocab))
    return vocab


class IntentDataset(Dataset):
    def __init__(self, rows, vocab, max_len):
        self.rows, self.vocab, self.max_len = rows, vocab, max_len

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        row = self.rows[i]
        ids = [2] + [self.vocab.get(w, 1) for w in row["text"].split()][: self.max_len - 2] + [3]
        mask = [1] * len(ids)
        pad = self.max_len - len(ids)
        return {
            "input_ids": torch.tensor(ids + [0] * pad),
            "attention_mask": torch.tensor(mask + [0] * pad),
            "labels": torch.tensor(row["label"]),
        }


def setup_logging(rank):
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format=f"%(asctime)s rank{rank} %(levelname)s %(message)s")


def worker(rank, world_size, cfg, init_method, rows, vocab):
    setup_logging(rank)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world_size)
    torch.manual_seed(cfg["seed"])

    ds = IntentDataset(rows, vocab, cfg["max_len"])
    sampler = DistributedSampler(ds, num_replicas=world_size, rank=rank, shuffle=True,
                                 seed=cfg["seed"])
    loader = DataLoader(ds, batch_size=cfg["batch_size"], sampler=sampler)

    config = DistilBertConfig(vocab_size=len(vocab), num_labels=len(INTENTS),
                              id2label=dict(enumerate(INTENTS)),
                              label2id={n: i for i, n in enumerate(INTENTS)}, **cfg["model"])
    model = DistilBertForSequenceClassification(config)
    ddp = DDP(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=cfg["lr"])
    log.info("world %d, %d examples, %d per rank", world_size, len(ds), len(sampler))

    for epoch in range(cfg["epochs"]):
        sampler.set_epoch(epoch)
        ddp.train()
        total, t0 = 0.0, time.time()
        for batch in loader:
            out = ddp(**batch)
            out.loss.backward()
            opt.step()
            opt.zero_grad()
            total += out.loss.item()
        loss = torch.tensor([total / max(1, len(loader))])
        dist.all_reduce(loss)
        if rank == 0:
            log.info("epoch %d mean loss %.4f (%.1fs)", epoch, loss.item() / world_size,
                     time.time() - t0)

    if rank == 0:
        correct = 0
        ddp.eval()
        with torch.no_grad():
            for batch in DataLoader(ds, batch_size=cfg["batch_size"]):
                pred = ddp(input_ids=batch["input_ids"],
                           attention_mask=batch["attention_mask"]).logits.argmax(-1)
                correct += (pred == batch["labels"].long()).sum().item()
        log.info("train accuracy %.2f", correct / len(ds))
    dist.barrier()
    dist.destroy_process_group()


def main():
    nprocs = int(os.environ.get("INTENT_WORKERS", CONFIG["nprocs"]))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rows = read_export(EXPORT)
    vocab = build_vocab(rows)
    init_method = f"tcp://127.0.0.1:{free_port()}"
    print(f"{len(rows)} rows, {len(vocab)} words, {nprocs} workers via {init_method}")
    mp.spawn(worker, args=(nprocs, CONFIG, init_method, rows, vocab), nprocs=nprocs, join=True)
    print("done")


if __name__ == "__main__":
    main()
