"""Ticket router trained with DDP on CPU boxes (tiny FNet, word vocab built in code).

Routes support tickets to billing / shipping / account queues. Each rank trains on its shard; after
every epoch the ranks average the dev loss and vote on early stopping, so that they all stop at the
same epoch (a rank that stops alone would hang the others in the next all-reduce).

    torchrun --nproc_per_node 2 torchrun_fnet_ticket_router.py --epochs 4 --patience 1
"""
import argparse
import logging
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from transformers import FNetConfig, FNetForSequenceClassification

log = logging.getLogger("ticket-router")

QUEUES = ["billing", "shipping", "account"]
MODEL = dict(hidden_size=32, num_hidden_layers=2, intermediate_size=64, max_position_embeddings=32,
             type_vocab_size=2, pad_token_id=0)
TICKETS = {
    "billing": ["i was charged twice this month", "refund my last invoice please", "card declined at checkout",
                "why is my bill higher", "cancel the extra charge", "invoice shows the wrong amount"],
    "shipping": ["my parcel has not arrived", "tracking says delivered but nothing came", "the box was damaged",
                 "can you ship to another address", "delivery is late again", "courier left it at the wrong door"],
    "account": ["i cannot log in", "reset my password please", "change the email on my account",
                "two factor code never arrives", "delete my profile", "my username is taken"],
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--max-len", type=int, default=12)
    p.add_argument("--patience", type=int, default=1)
    p.add_argument("--seed", type=int, default=17)
    return p.parse_args()


def build_dataset(max_len):
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2}
    rows, labels = [], []
    for label, queue in enumerate(QUEUES):
        for text in TICKETS[queue]:
            ids = [2] + [vocab.setdefault(w, len(vocab)) for w in text.split()]
            rows.append((ids + [0] * max_len)[:max_len])
            labels.append(label)
    return vocab, TensorDataset(torch.tensor(rows), torch.tensor(labels))


def dev_loss(model, loader):
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for input_ids, labels in loader:
            out = model(input_ids=input_ids, labels=labels)
            total += out.loss.item() * labels.numel()
            n += labels.numel()
    model.train()
    return total, n


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [rank{rank}] %(message)s")
    torch.manual_seed(args.seed)

    vocab, dataset = build_dataset(args.max_len)
    n_dev = len(dataset) // 3
    gen = torch.Generator().manual_seed(args.seed)
    train_set, dev_set = torch.utils.data.random_split(dataset, [len(dataset) - n_dev, n_dev], generator=gen)
    train_sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    train_dl = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    dev_dl = DataLoader(dev_set, batch_size=args.batch_size,
                        sampler=DistributedSampler(dev_set, num_replicas=world, rank=rank, shuffle=False))

    config = FNetConfig(vocab_size=len(vocab), num_labels=len(QUEUES), **MODEL)
    model = DDP(FNetForSequenceClassification(config))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    if rank == 0:
        log.info("fnet: %d parameters, %d train / %d dev tickets, world %d",
                 sum(p.numel() for p in model.parameters()), len(train_set), len(dev_set), world)

    best, bad_epochs = float("inf"), 0
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        for step, (input_ids, labels) in enumerate(train_dl):
            loss = model(input_ids=input_ids, labels=labels).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
        total, n = dev_loss(model, dev_dl)
        stats = torch.tensor([total, float(n)])
        dist.all_reduce(stats, op=dist.ReduceOp.SUM)
        mean_dev = (stats[0] / stats[1]).item()
        bad_epochs = 0 if mean_dev < best else bad_epochs + 1
        best = min(best, mean_dev)
        log.info("epoch %d: dev loss %.4f (best %.4f, bad epochs %d)", epoch, mean_dev, best, bad_epochs)
        # every rank must agree before anyone stops
        stop = torch.tensor([1.0 if bad_epochs >= args.patience else 0.0])
        dist.all_reduce(stop, op=dist.ReduceOp.BAND)
        if stop.item() > 0:
            log.info("early stop after epoch %d", epoch)
            break

    if rank == 0:
        log.info("finished: best dev loss %.4f (run %s)", best, os.environ.get("TORCHELASTIC_RUN_ID", "-"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
