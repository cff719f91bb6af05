"""Export sentence embeddings for the catalogue search index, sharded over torchrun ranks.

Each rank encodes its slice of product titles; after every batch the embeddings are all-gathered
so rank 0 can stream them into the index file without a second pass.

    torchrun --nproc_per_node 2 torchrun_embed_gather.py --batch-size 4 --out index.pt
"""
import argparse
import logging
import os
import time

import torch
import torch.distributed as dist
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModel, PreTrainedTokenizerFast, RobertaConfig

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
logger = logging.getLogger("embed-export")

ENCODER = {
    "hidden_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 96,
    "max_position_embeddings": 40,
}

TITLES = [
    "red cotton t shirt", "blue denim jacket", "wireless mouse black", "usb c charging cable",
    "stainless steel water bottle", "yoga mat green", "running shoes size ten", "coffee grinder",
    "ceramic mug set", "leather wallet brown", "bluetooth speaker small", "desk lamp white",
    "hiking backpack blue", "phone case clear", "gaming keyboard red", "wool socks grey",
    "kitchen knife set", "notebook a5 dotted", "travel pillow", "sunglasses black frame",
    "electric kettle steel", "cotton bed sheets white", "mechanical pencil",
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-length", type=int, default=12)
    p.add_argument("--no-normalize", dest="normalize", action="store_false")
    p.add_argument("--out", default="index.pt")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def build_tokenizer():
    words = sorted({w for t in TITLES for w in t.split()})
    vocab = {w: i for i, w in enumerate(["<s>", "<pad>", "</s>", "<unk>"] + words)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")


def build_encoder(tokenizer, seed):
    torch.manual_seed(seed)  # same weights on every rank
    cfg = RobertaConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                        **ENCODER)
    return AutoModel.from_config(cfg).eval()


def batches(rows, size):
    for i in range(0, len(rows), size):
        yield rows[i:i + size]


@torch.no_grad()
def encode(model, tokenizer, texts, max_length, normalize):
    enc = tokenizer(texts, padding=True, truncation=True, max_length=max_length,
                    return_tensors="pt")
    hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
    if normalize:
        emb = torch.nn.functional.normalize(emb, dim=-1)
    return emb


def main():
    args = parse_args()
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    logger.info("rank %d/%d up (OMP_NUM_THREADS=%s)", rank, world, os.environ.get("OMP_NUM_THREADS"))

    tokenizer = build_tokenizer()
    model = build_encoder(tokenizer, args.seed)
    shard = TITLES[rank::world]
    logger.info("rank %d encodes %d titles", rank, len(shard))

    # allocate the receive buffers once, we gather after every batch
    gather_bufs = [torch.empty(args.batch_size, ENCODER["hidden_size"]) for _ in range(world)]
    collected = []
    t0 = time.time()
    for step, chunk in enumerate(batches(shard, args.batch_size)):
        emb = encode(model, tokenizer, chunk, args.max_length, args.normalize)
        dist.all_gather(gather_bufs, emb)
        if rank == 0:
            collected.extend(b.clone() for b in gather_bufs)
            logger.info("step %d: %d rows so far", step, sum(len(c) for c in collected))

    if rank == 0:
        index = torch.cat(collected)
        torch.save({"embeddings": index, "encoder": ENCODER}, args.out)
        logger.info("wrote %s rows to %s in %.1fs", tuple(index.shape), args.out, time.time() - t0)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
