"""Two-stage review classifier: a binary sentiment warm-up in the parent, then a 3-class
(negative / neutral / positive) fine-tune on CPU ranks that start from the warm-up checkpoint.

The parent trains the ELECTRA-small-ish model for a few steps, saves model + tokenizer into a
scratch folder and exports its path as REVIEW_CKPT; every rank loads it with from_pretrained and
the new label maps, wraps it in DDP and trains.

    python spawn_ckpt_relabel_ranks.py --steps 2 --ranks 2
"""
import argparse
import logging
import os
import shutil
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import (AutoModelForSequenceClassification, AutoTokenizer, ElectraConfig,
                          ElectraForSequenceClassification, PreTrainedTokenizerFast)

WARMUP_LABELS = ["negative", "positive"]
FINAL_LABELS = ["negative", "neutral", "positive"]

ELECTRA = dict(embedding_size=16, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
               num_attention_heads=4, max_position_embeddings=64, hidden_dropout_prob=0.0)

LOAD = {
    "num_labels": len(FINAL_LABELS),
    "id2label": dict(enumerate(FINAL_LABELS)),
    "label2id": {l: i for i, l in enumerate(FINAL_LABELS)},
    "dtype": torch.float32,
}

WARMUP = [("great phone and fast delivery", 1), ("screen cracked after a week", 0),
          ("battery lasts all day", 1), ("support never answered", 0),
          ("love the camera", 1), ("it stopped charging", 0)]
FINAL = [("it is fine i guess", 1), ("arrived on time nothing special", 1),
         ("great phone and fast delivery", 2), ("screen cracked after a week", 0),
         ("battery lasts all day", 2), ("support never answered", 0),
         ("works as described", 1), ("love the camera", 2)]

log = logging.getLogger("relabel")


def get_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--max-len", type=int, default=16)
    return ap.parse_args()


def make_tokenizer(texts):
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for t in texts:
        for w in t.split():
            vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                      special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def encode(tok, pairs, max_len):
    enc = tok([t for t, _ in pairs], padding=True, truncation=True, max_length=max_len,
              return_tensors="pt")
    enc["labels"] = torch.tensor([y for _, y in pairs])
    return enc


def warmup_and_save(args, out_dir):
    torch.manual_seed(0)
    tok = make_tokenizer([t for t, _ in WARMUP + FINAL])
    config = ElectraConfig(vocab_size=len(tok), num_labels=len(WARMUP_LABELS),
                           id2label=dict(enumerate(WARMUP_LABELS)),
                           label2id={l: i for i, l in enumerate(WARMUP_LABELS)}, **ELECTRA)
    model = ElectraForSequenceClassification(config)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    batch = encode(tok, WARMUP, args.max_len)
    for step in range(args.steps):
        loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        log.info("warm-up step %d loss %.4f", step, loss.item())
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    log.info("saved warm-up checkpoint (%d labels)", config.num_labels)


def finetune(rank, world, args, rdzv_file):
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format=f"%(asctime)s r{rank}/{world} %(message)s")
    dist.init_process_group("gloo", init_method=f"file://{rdzv_file}", rank=rank,
                            world_size=world)
    ckpt = os.environ["REVIEW_CKPT"]
    tok = AutoTokenizer.from_pretrained(ckpt)
    model = AutoModelForSequenceClassification.from_pretrained(ckpt, **LOAD)
    ddp = DDP(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=args.lr)
    batch = encode(tok, FINAL[rank::world], args.max_len)
    for step in range(args.steps):
        loss = ddp(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        if rank == 0:
            log.info("fine-tune step %d loss %.4f", step, loss.item())
    dist.destroy_process_group()


def main():
    args = get_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s parent %(message)s")
    scratch = tempfile.mkdtemp(prefix="relabel-")
    try:
        ckpt = os.path.join(scratch, "warmup")
        warmup_and_save(args, ckpt)
        os.environ["REVIEW_CKPT"] = ckpt
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        mp.spawn(finetune, args=(args.ranks, args, os.path.join(scratch, "rdzv")),
                 nprocs=args.ranks)
        log.info("fine-tune finished")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
