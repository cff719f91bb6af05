"""Commit-message language model: a small Reformer trained with DDP on two CPU ranks.

We want a long-context LM for commit messages eventually; this is the CPU smoke run of the recipe
(two gloo ranks started with torch.multiprocessing.spawn, everything configured in CFG) before the
cluster job. Commit messages are canned here; the real run reads them from the git history dump.

    python spawn_reformer_commit_lm.py
"""
import logging
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from transformers import ReformerConfig, ReformerModelWithLMHead

CFG = {
    "world_size": 2,
    "model": {
        "hidden_size": 32, "num_attention_heads": 2, "attention_head_size": 16, "feed_forward_size": 64,
        "attn_layers": ["local", "lsh"], "local_attn_chunk_length": 8, "lsh_attn_chunk_length": 8,
        "num_buckets": 4, "num_hashes": 1, "axial_pos_embds": False, "max_position_embeddings": 64,
        "is_decoder": True,
    },
    "train": {"epochs": 2, "batch_size": 4, "lr": 5e-4, "clip": 1.0, "log_every": 1},
    "data": {"seed": 13, "max_words": 20},
    "dist": {"backend": "gloo", "addr": "127.0.0.1"},
}

COMMITS = [
    "fix off by one in the page iterator",
    "add retry with backoff to the upload client",
    "bump the lockfile after the security advisory",
    "refactor config loading into its own module and add tests",
    "docs explain how to run the integration suite locally",
    "remove the deprecated cli flag",
    "handle empty responses from the metrics endpoint without crashing the exporter",
    "speed up the diff renderer for large files",
    "revert the cache change that broke windows builds",
    "log the request id on every error path",
    "make the scheduler respect the configured time zone",
    "rename internal helpers for clarity",
]

log = logging.getLogger("commit-lm")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_vocab(texts):
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for t in texts:
        for w in t.split():
            vocab.setdefault(w, len(vocab))
    return vocab


class CommitDataset(Dataset):
    def __init__(self, texts, vocab, max_words):
        self.rows = [[vocab["<s>"]] + [vocab.get(w, 3) for w in t.split()[:max_words]] + [vocab["</s>"]]
                     for t in texts]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def pad_to_longest(rows, pad_id=0):
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def run(rank, world_size, model_cfg, train_cfg, data_cfg, dist_cfg):
    os.environ["MASTER_ADDR"] = dist_cfg["addr"]
    os.environ["MASTER_PORT"] = str(dist_cfg["port"])
    dist.init_process_group(dist_cfg["backend"], rank=rank, world_size=world_size)
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [rank{rank}] %(message)s")
    try:
        torch.manual_seed(data_cfg["seed"])
        vocab = build_vocab(COMMITS)
        ds = CommitDataset(COMMITS, vocab, data_cfg["max_words"])
        sampler = DistributedSampler(ds, num_replicas=world_size, rank=rank, shuffle=True, seed=data_cfg["seed"])
        loader = DataLoader(ds, batch_size=train_cfg["batch_size"], sampler=sampler, collate_fn=pad_to_longest)
        config = ReformerConfig(vocab_size=len(vocab), pad_token_id=vocab["<pad>"], eos_token_id=vocab["</s>"],
                                **model_cfg)
        model = DDP(ReformerModelWithLMHead(config))
        opt = torch.optim.AdamW(model.parameters(), lr=train_cfg["lr"])
        log.info("model ready: %d params, %d batches per epoch",
                 sum(p.numel() for p in model.parameters()), len(loader))
        step = 0
        for epoch in range(train_cfg["epochs"]):
            sampler.set_epoch(epoch)
            model.train()
            t0 = time.time()
            for batch in loader:
                out = model(**batch)
                out.loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), train_cfg["clip"])
                opt.step()
                opt.zero_grad()
                step += 1
                if step % train_cfg["log_every"] == 0:
                    loss = out.loss.detach().clone()
                    dist.all_reduce(loss)
                    log.info("epoch %d step %d loss %.3f", epoch, step, loss.item() / world_size)
            log.info("epoch %d done in %.1fs", epoch, time.time() - t0)
        if rank == 0:
            log.info("training finished after %d steps", step)
    finally:
        dist.destroy_process_group()


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [main] %(message)s")
    dist_cfg = dict(CFG["dist"], port=free_port())
    log.info("starting %d ranks on port %d", CFG["world_size"], dist_cfg["port"])
    mp.spawn(run, args=(CFG["world_size"], CFG["model"], CFG["train"], CFG["data"], dist_cfg),
             nprocs=CFG["world_size"], join=True)
    log.info("done")


if __name__ == "__main__":
    main()
