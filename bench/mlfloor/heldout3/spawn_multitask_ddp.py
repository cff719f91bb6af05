"""Multi-task fine-tuning (review sentiment + news topic) on one shared encoder, DDP via mp.spawn.

The parent pins the thread env, writes a fresh tiny checkpoint (encoder + tokenizer) to a
folder, and spawns one worker per rank. Each worker joins the process group over tcp:// and
reads only the data sources assigned to its rank.

    python spawn_multitask_ddp.py --world-size 2 --steps 6 --ckpt-dir /tmp/mt_ckpt
"""
import argparse
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from tokenizers import Tokenizer, models, pre_tokenizers
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModel, AutoTokenizer, ElectraConfig, ElectraModel, PreTrainedTokenizerFast

SOURCES = {
    "reviews": [("great product works well", 1), ("broke after one day", 0), ("love it", 1),
                ("waste of money", 0), ("fast delivery good quality", 1), ("terrible support", 0),
                ("works as described", 1), ("cheap plastic feel", 0)],
    "news": [("team wins the final match", 0), ("stocks fall after report", 1),
             ("new phone model released", 2), ("election results announced", 3),
             ("coach signs new contract", 0), ("bank raises interest rate", 1),
             ("chip maker shows new laptop", 2), ("parliament passes budget", 3)],
}
TASK_OF_SOURCE = {"reviews": "sentiment", "news": "topic"}
HEADS = {"sentiment": 2, "topic": 4}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--port", type=int, default=29531)
    p.add_argument("--ckpt-dir", default=os.path.join(tempfile.gettempdir(), "mt_ckpt_demo"))
    return p.parse_args()


def write_checkpoint(ckpt_dir):
    words = sorted({w for rows in SOURCES.values() for t, _ in rows for w in t.split()})
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + words)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]",
                                  cls_token="[CLS]", sep_token="[SEP]")
    torch.manual_seed(0)
    enc = ElectraModel(ElectraConfig(vocab_size=len(tok), embedding_size=24, hidden_size=32,
                                     num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=32, pad_token_id=tok.pad_token_id))
    os.makedirs(ckpt_dir, exist_ok=True)
    enc.save_pretrained(ckpt_dir)
    tok.save_pretrained(ckpt_dir)


class MultiTaskModel(nn.Module):
    def __init__(self, encoder, heads):
        super().__init__()
        self.encoder = encoder
        self.heads = nn.ModuleDict({t: nn.Linear(encoder.config.hidden_size, n) for t, n in heads.items()})

    def forward(self, input_ids, attention_mask, tasks, labels):
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        pooled = hidden[:, 0]
        loss = hidden.new_zeros(())
        for task in sorted(set(tasks)):
            idx = torch.tensor([i for i, t in enumerate(tasks) if t == task])
            logits = self.heads[task](pooled[idx])
            loss = loss + nn.functional.cross_entropy(logits, labels[idx])
        return loss


def rank_examples(rank, settings):
    rows = []
    for src in settings["sources_by_rank"][rank]:
        rows += [(text, label, TASK_OF_SOURCE[src]) for text, label in SOURCES[src]]
    rows.sort(key=lambda r: r[0])  # deterministic, mixes the sources
    return rows


def worker(rank, world_size, args, settings):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                            rank=rank, world_size=world_size)
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    tok = AutoTokenizer.from_pretrained(args.ckpt_dir)
    model = DDP(MultiTaskModel(AutoModel.from_pretrained(args.ckpt_dir), HEADS))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    rows = rank_examples(rank, settings)
    print(f"[rank {rank}] {len(rows)} examples from {settings['sources_by_rank'][rank]}", flush=True)

    for step in range(args.steps):
        start = (step * args.batch_size) % len(rows)
        batch = rows[start:start + args.batch_size]
        texts, labels, tasks = zip(*batch)
        enc = tok(list(texts), padding=True, truncation=True, max_length=settings["max_length"],
                  return_tensors="pt")
        loss = model(enc["input_ids"], enc["attention_mask"], list(tasks), torch.tensor(labels))
        loss.backward()
        opt.step()
        opt.zero_grad()
        if rank == 0 and step % settings["log_every"] == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


def main():
    args = parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    write_checkpoint(args.ckpt_dir)
    settings = {
        "sources_by_rank": {0: ["reviews", "news"], 1: ["reviews"]},  # news dump only mounted on node 0
        "max_length": 16,
        "log_every": 2,
    }
    t0 = time.time()
    mp.spawn(worker, args=(args.world_size, args, settings), nprocs=args.world_size, join=True)
    print(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
