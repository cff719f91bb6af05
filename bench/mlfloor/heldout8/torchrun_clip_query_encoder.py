"""Query encoder for product search: a small CLIP text tower trained with DDP on query/title pairs.

Each rank takes its share of the (query, product title) pairs and trains the tower contrastively,
queries against the titles of the same batch (in-batch negatives, no gather). Rank 0 writes the
resolved model config into the run folder first, so every rank, and later the export job, builds
the model from the same JSON file.

    torchrun --nproc_per_node 2 torchrun_clip_query_encoder.py --epochs 2 --batch-size 4
"""
import argparse
import json
import logging
import os
import shutil
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler
from transformers import CLIPTextConfig, CLIPTextModelWithProjection

log = logging.getLogger("query-tower")

# search queries are short, so the tower only needs a few positions
MODEL_CFG = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "projection_dim": 16, "max_position_embeddings": 16, "pad_token_id": 0, "bos_token_id": 1,
             "eos_token_id": 2}

PAIRS = [
    ("running shoes men", "lightweight running shoes for men"),
    ("usb c cable", "braided usb c cable two metres"),
    ("coffee grinder", "manual burr coffee grinder"),
    ("yoga mat thick", "thick non slip yoga mat"),
    ("desk lamp", "led desk lamp with dimmer"),
    ("water bottle", "insulated steel water bottle"),
    ("phone case", "clear shockproof phone case"),
    ("wireless mouse", "silent wireless mouse with receiver"),
    ("kids backpack", "small kids backpack with side pockets"),
    ("garden hose", "expandable garden hose fifteen metres with spray nozzle seven modes brass fittings "
                    "and storage bag for patio lawn and car washing"),
    ("tea kettle", "electric tea kettle one litre"),
    ("hiking socks", "wool hiking socks three pairs"),
    ("laptop stand", "adjustable aluminium laptop stand"),
    ("rain jacket", "packable rain jacket with hood"),
    ("bike light", "rechargeable front bike light"),
    ("notebook a5", "dotted a5 notebook hard cover"),
]


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--temperature", type=float, default=0.07)
    p.add_argument("--max-query-len", type=int, default=8)
    p.add_argument("--seed", type=int, default=3)
    return p.parse_args()


def build_vocab(pairs):
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for query, title in pairs:
        for word in (query + " " + title).split():
            vocab.setdefault(word, len(vocab))
    return vocab


def encode(text, vocab, max_len=None):
    ids = [vocab.get(w, vocab["<unk>"]) for w in text.split()]
    if max_len is not None:
        ids = ids[:max_len]
    return [vocab["<s>"]] + ids + [vocab["</s>"]]


class PairDataset(Dataset):
    def __init__(self, pairs, vocab, max_query_len):
        # titles come from the catalogue and are short enough, only queries are cut
        self.rows = [(encode(q, vocab, max_query_len), encode(t, vocab)) for q, t in pairs]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def pad_batch(seqs):
    width = max(len(s) for s in seqs)
    ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs])
    return ids, (ids != 0).long()


def collate(rows):
    queries, titles = zip(*rows)
    return pad_batch(queries), pad_batch(titles)


def write_model_config(run_dir, vocab_size):
    path = os.path.join(run_dir, "model_config.json")
    with open(path, "w") as f:
        json.dump(dict(MODEL_CFG, vocab_size=vocab_size), f, indent=2)
    return path


def contrastive_loss(model, queries, titles, temperature):
    q = F.normalize(model(input_ids=queries[0], attention_mask=queries[1]).text_embeds, dim=-1)
    t = F.normalize(model(input_ids=titles[0], attention_mask=titles[1]).text_embeds, dim=-1)
    logits = q @ t.T / temperature
    target = torch.arange(len(q))
    return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s rank{rank} %(message)s")
    torch.manual_seed(args.seed)
    vocab = build_vocab(PAIRS)
    box = [tempfile.mkdtemp(prefix="query-tower-") if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    run_dir = box[0]
    try:
        if rank == 0:
            write_model_config(run_dir, len(vocab))
        dist.barrier()
        with open(os.path.join(run_dir, "model_config.json")) as f:
            config = CLIPTextConfig.from_dict(json.load(f))
        model = DDP(CLIPTextModelWithProjection(config))
        dataset = PairDataset(PAIRS, vocab, args.max_query_len)
        sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=False)
        loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, collate_fn=collate)
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            for step, (queries, titles) in enumerate(loader):
                loss = contrastive_loss(model, queries, titles, args.temperature)
                opt.zero_grad()
                loss.backward()
                opt.step()
                log.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
        dist.barrier()
        if rank == 0:
            log.info("trained; config kept at %s", run_dir)
    finally:
        if rank == 0:
            shutil.rmtree(run_dir, ignore_errors=True)
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
