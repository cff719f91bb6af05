"""Copy task with a small memory-augmented network (NTM-style).

An LSTM controller reads from and writes to an external memory matrix through one content-based
head. The memory's initial contents are a fixed random bias that should travel with the module
(.to(), state_dict), so it is registered as a buffer. Sequences of random bit vectors are made in
code; the network has to reproduce them after a delimiter.
"""
import argparse
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("ntm-copy")


class Memory(nn.Module):
    def __init__(self, n_slots, width):
        super().__init__()
        self.n_slots = n_slots
        self.width = width
        stdev = 1.0 / math.sqrt(n_slots + width)
        self.mem_bias = torch.empty(n_slots, width).uniform_(-stdev, stdev)
        self.register_buffer("mem_bias", self.mem_bias)

    def reset(self, batch_size):
        self.memory = self.mem_bias.clone().unsqueeze(0).repeat(batch_size, 1, 1)

    def address(self, key, strength):
        sim = F.cosine_similarity(self.memory, key.unsqueeze(1), dim=-1)
        return torch.softmax(strength * sim, dim=-1)

    def read(self, weights):
        return torch.bmm(weights.unsqueeze(1), self.memory).squeeze(1)

    def write(self, weights, erase, add):
        erase_term = weights.unsqueeze(-1) * erase.unsqueeze(1)
        add_term = weights.unsqueeze(-1) * add.unsqueeze(1)
        self.memory = self.memory * (1 - erase_term) + add_term


class NTM(nn.Module):
    def __init__(self, n_bits, hidden, n_slots, width):
        super().__init__()
        self.memory = Memory(n_slots, width)
        self.controller = nn.LSTMCell(n_bits + 1 + width, hidden)
        self.head = nn.Linear(hidden, 3 * width + 1)
        self.out = nn.Linear(hidden + width, n_bits)
        self.width = width
        self.hidden = hidden

    def forward(self, seq):
        steps, batch, _ = seq.shape
        self.memory.reset(batch)
        h = seq.new_zeros(batch, self.hidden)
        c = seq.new_zeros(batch, self.hidden)
        read = seq.new_zeros(batch, self.width)
        outputs = []
        for t in range(steps):
            h, c = self.controller(torch.cat([seq[t], read], dim=-1), (h, c))
            key, erase, add, strength = torch.split(self.head(h), [self.width, self.width, self.width, 1], dim=-1)
            weights = self.memory.address(torch.tanh(key), F.softplus(strength))
            read = self.memory.read(weights)
            self.memory.write(weights, torch.sigmoid(erase), torch.tanh(add))
            outputs.append(self.out(torch.cat([h, read], dim=-1)))
        return torch.stack(outputs)


def copy_batch(batch_size, seq_len, n_bits, gen):
    bits = torch.randint(0, 2, (seq_len, batch_size, n_bits), generator=gen).float()
    inp = torch.zeros(2 * seq_len + 1, batch_size, n_bits + 1)
    inp[:seq_len, :, :n_bits] = bits
    inp[seq_len, :, n_bits] = 1.0  # delimiter
    return inp, bits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bits", type=int, default=6)
    ap.add_argument("--seq-len", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--width", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    model = NTM(args.bits, args.hidden, args.slots, args.width)
    log.info("parameters: %d", sum(p.numel() for p in model.parameters()))
    opt = torch.optim.RMSprop(model.parameters(), lr=args.lr, momentum=0.9)
    for step in range(1, args.steps + 1):
        inp, target = copy_batch(args.batch_size, args.seq_len, args.bits, gen)
        logits = model(inp)[args.seq_len + 1:]
        loss = F.binary_cross_entropy_with_logits(logits, target)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        if step % 10 == 0:
            errors = ((logits > 0).float() - target).abs().sum().item() / args.batch_size
            log.info("step %d loss %.4f bit errors/seq %.2f", step, loss.item(), errors)
    log.info("buffers: %s", [name for name, _ in model.named_buffers()])


if __name__ == "__main__":
    main()
