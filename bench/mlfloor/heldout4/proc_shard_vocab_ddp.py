"""Train a tiny Llama on recipe steps, each rank streaming its own shard file.

The parent splits the corpus into one JSONL shard per rank, picks a free port and starts one
multiprocessing.Process per rank. Each rank builds its word-level tokenizer from the shard it
reads (the full corpus does not fit in memory on the real job), then the model from that
tokenizer, and trains it under DDP.

    python proc_shard_vocab_ddp.py --ranks 2 --data-dir shards --epochs 1
"""
import argparse
import json
import logging
import multiprocessing as mp
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]

CORPUS = [
    "preheat the oven to two hundred degrees",
    "whisk the eggs with a pinch of salt",
    "fold the flour gently into the batter",
    "let the dough rest for one hour",
    "chop the onions and fry them until golden",
    "season the soup with pepper and thyme",
    "grate the cheese over the warm pasta",
    "simmer the tomatoes for twenty minutes",
    "slice the bread and toast it lightly",
    "stir the risotto until the rice is creamy",
    "brush the pastry with melted butter",
    "roast the peppers until the skin blisters",
    "marinate the chicken overnight in yogurt",
    "serve the salad with a lemon dressing",
]

ARCH = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--data-dir", default="shards")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--max-len", type=int, default=16)
    return p.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_shards(data_dir, ranks):
    os.makedirs(data_dir, exist_ok=True)
    paths = []
    for r in range(ranks):
        path = os.path.join(data_dir, f"shard-{r:03d}.jsonl")
        with open(path, "w") as f:
            for i, text in enumerate(CORPUS[r::ranks]):
                f.write(json.dumps({"id": i * ranks + r, "text": text}) + "\n")
        paths.append(path)
    return paths


def read_shard(path):
    with open(path) as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def tokenizer_from_texts(texts):
    words = sorted({w for t in texts for w in t.split()})
    vocab = {tok: i for i, tok in enumerate(SPECIALS + words)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", vocab["<s>"]), ("</s>", vocab["</s>"])])
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>",
                                   bos_token="<s>", eos_token="</s>")


def run_rank(rank, world, port, shard_path, opts):
    logging.basicConfig(level=logging.INFO, format=f"[rank {rank}] %(message)s")
    log = logging.getLogger("recipes")
    dist.init_process_group(opts["backend"], init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    texts = read_shard(shard_path)
    tok = tokenizer_from_texts(texts)
    log.info("%d lines, vocab %d", len(texts), len(tok))

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, **ARCH)
    model = DDP(LlamaForCausalLM(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=opts["lr"])

    for epoch in range(opts["epochs"]):
        for i in range(0, len(texts), 2):
            enc = tok(texts[i:i + 2], padding=True, truncation=True, max_length=opts["max_len"],
                      return_tensors="pt")
            labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
            loss = model(**enc, labels=labels).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
        log.info("epoch %d loss %.3f", epoch, loss.item())
    dist.destroy_process_group()


def main():
    args = parse_args()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    shards = write_shards(args.data_dir, args.ranks)
    port = free_port()
    opts = {"backend": backend, "lr": args.lr, "epochs": args.epochs, "max_len": args.max_len}
    print(f"backend={backend} port={port} shards={shards}", flush=True)

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=run_rank, args=(r, args.ranks, port, shards[r], opts))
             for r in range(args.ranks)]
    t0 = time.time()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    codes = [p.exitcode for p in procs]
    print(f"ranks finished in {time.time() - t0:.1f}s with exit codes {codes}", flush=True)
    if any(codes):
        sys.exit(1)


if __name__ == "__main__":
    main()
