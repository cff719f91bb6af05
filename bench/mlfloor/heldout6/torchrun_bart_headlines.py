"""Headline generation: fine-tune a tiny BART on (article, headline) pairs with DDP, then rank 0
writes a few sample headlines.

    torchrun --nproc_per_node 2 torchrun_bart_headlines.py --epochs 2
"""
import argparse
import logging
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler
from transformers import BartConfig, BartForConditionalGeneration

log = logging.getLogger("headlines")

PAIRS = [
    ("the city council approved the new bike lanes on tuesday", "council approves bike lanes"),
    ("heavy rain flooded several streets near the river", "rain floods river streets"),
    ("the local team won the final after extra time", "local team wins final"),
    ("a new library opens downtown next month", "new library opens downtown"),
    ("the museum extends its opening hours for the summer", "museum extends summer hours"),
    ("train services resume after the strike ends", "trains resume after strike"),
    ("the bakery on main street celebrates fifty years", "bakery celebrates fifty years"),
    ("schools close early because of the heat wave", "heat closes schools early"),
]

BART = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
            max_position_embeddings=64, dropout=0.0)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--num-samples", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=6)
    return ap.parse_args()


def build_vocab():
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for art, head in PAIRS:
        for w in (art + " " + head).split():
            vocab.setdefault(w, len(vocab))
    return vocab


class HeadlineDataset(Dataset):
    def __init__(self, pairs, vocab):
        self.pairs, self.vocab = pairs, vocab

    def __len__(self):
        return len(self.pairs)

    def encode(self, text):
        return [0] + [self.vocab.get(w, 3) for w in text.split()] + [2]

    def __getitem__(self, i):
        art, head = self.pairs[i]
        return self.encode(art), self.encode(head)


def collate(batch):
    def pad(seqs, value):
        width = max(len(s) for s in seqs)
        return torch.tensor([s + [value] * (width - len(s)) for s in seqs])

    src = pad([a for a, _ in batch], 1)
    labels = pad([h for _, h in batch], -100)
    return {"input_ids": src, "attention_mask": (src != 1).long(), "labels": labels}


def sample_headlines(model, ds, inv_vocab, n, max_new_tokens):
    model.eval()
    for i in range(n):
        src, _ = ds[i]
        ids = torch.tensor([src])
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 max_new_tokens=max_new_tokens, num_beams=2)
        words = [inv_vocab[t] for t in out[0].tolist() if t > 3]
        log.info("%s -> %s", ds.pairs[i][0], " ".join(words))


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [rank {rank}] %(message)s")
    torch.set_num_threads(1)
    torch.manual_seed(1234)

    vocab = build_vocab()
    inv_vocab = {i: w for w, i in vocab.items()}
    ds = HeadlineDataset(PAIRS, vocab)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler, collate_fn=collate)

    config = BartConfig(vocab_size=len(vocab), pad_token_id=1, bos_token_id=0, eos_token_id=2,
                        decoder_start_token_id=2, forced_eos_token_id=2, **BART)
    model = DDP(BartForConditionalGeneration(config))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total = torch.zeros(1)
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            total += loss.detach()
        dist.all_reduce(total)
        if rank == 0:
            log.info("epoch %d mean loss %.3f", epoch, total.item() / (world * len(loader)))

    if rank == 0:
        sample_headlines(model, ds, inv_vocab, args.num_samples, args.max_new_tokens)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
