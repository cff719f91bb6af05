"""Duplicate-question detector: a RoBERTa-style cross-encoder with our own pooling head, trained
with DDP under torchrun.

The encoder config mirrors the roberta-base config.json we use in production (scaled down); the
head averages the token states of both questions and classifies the pair.

    torchrun --nproc_per_node 2 torchrun_pair_classifier.py --epochs 1 --batch-size 4
"""
import argparse
import logging
import os
import random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaModel

logger = logging.getLogger("dupq")

# trimmed copy of roberta-base/config.json
ENCODER_CONFIG = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 66,
    "type_vocab_size": 1,
    "layer_norm_eps": 1e-5,
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
}

PAIRS = [
    ("how do i reset my password", "i forgot my password what now", 1),
    ("how do i reset my password", "how do i delete my account", 0),
    ("what is the refund policy", "can i get my money back", 1),
    ("what is the refund policy", "where do i enter a coupon", 0),
    ("how long is delivery", "when will my parcel arrive", 1),
    ("how long is delivery", "can i pay with paypal", 0),
    ("can i pay with paypal", "do you accept paypal", 1),
    ("where do i enter a coupon", "how do i use a discount code", 1),
    ("how do i delete my account", "how do i close my account", 1),
    ("when will my parcel arrive", "what is the refund policy", 0),
    ("do you accept paypal", "how do i close my account", 0),
    ("i forgot my password what now", "how long is delivery", 0),
]


class PairClassifier(nn.Module):
    """Encoder + masked mean pooling + a small MLP head."""

    def __init__(self, encoder_config, num_labels=2, dropout=0.1):
        super().__init__()
        self.encoder = RobertaModel(encoder_config, add_pooling_layer=False)
        hidden = encoder_config.hidden_size
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.Tanh(),
                                  nn.Linear(hidden, num_labels))

    def forward(self, input_ids, attention_mask, token_type_ids=None, labels=None):
        states = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-6)
        logits = self.head(pooled)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return loss, logits


def build_tokenizer():
    words = sorted({w for a, b, _ in PAIRS for w in (a + " " + b).split()})
    vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>"] + words)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s>:1 $B:1 </s>:1",
        special_tokens=[("<s>", 0), ("</s>", 2)],
    )
    # segment ids tell the encoder which question a token belongs to
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>",
                                   model_input_names=["input_ids", "token_type_ids",
                                                      "attention_mask"])


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--max-length", type=int, default=32)
    p.add_argument("--seed", type=int, default=17)
    return p.parse_args()


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format=f"%(asctime)s r{rank} %(message)s")
    logger.info("world %d, local rank %s", world, os.environ.get("LOCAL_RANK"))

    tok = build_tokenizer()
    cfg = RobertaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                        **ENCODER_CONFIG)
    torch.manual_seed(args.seed)
    model = DDP(PairClassifier(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    shard = PAIRS[rank::world]
    rng = random.Random(args.seed + rank)
    for epoch in range(args.epochs):
        rng.shuffle(shard)
        model.train()
        for i in range(0, len(shard), args.batch_size):
            batch = shard[i:i + args.batch_size]
            enc = tok([a for a, _, _ in batch], [b for _, b, _ in batch], padding=True,
                      truncation=True, max_length=args.max_length, return_tensors="pt")
            labels = torch.tensor([y for _, _, y in batch])
            loss, logits = model(**enc, labels=labels)
            loss.backward()
            opt.step()
            opt.zero_grad()
            acc = (logits.argmax(-1) == labels).float().mean().item()
            logger.info("epoch %d step %d loss %.4f acc %.2f", epoch, i // args.batch_size,
                        loss.item(), acc)

    if rank == 0:
        torch.save(model.module.state_dict(), "pair_classifier.pt")
        logger.info("saved pair_classifier.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
