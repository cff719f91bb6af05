"""Score candidate completions with a small causal LM in a separate spawn worker.

The parent refreshes a local checkpoint (model + tokenizer) and pins the runtime environment,
then hands the checkpoint to a worker process that computes a per-candidate LM loss so the
candidates can be reranked. Keeping the model in a child process keeps the parent light (it is
normally the API front end).

    python spawn_rerank_scorer.py --ckpt-dir /tmp/rerank_ckpt --max-length 24 --seed 3
"""
import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast)

SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]
WORDS = ("please reset my password account locked cannot login the app crashes when i open it "
         "refund order late delivery where is package thanks help you we will check your "
         "ticket has been escalated sorry for the trouble try again later").split()

CANDIDATES = {
    "q1": ["please try again later", "we will check your account", "sorry for the trouble"],
    "q2": ["your ticket has been escalated", "where is package", "thanks"],
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ckpt-dir", default=os.path.join(tempfile.gettempdir(), "rerank_ckpt_demo"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--max-length", type=int, default=24)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=4)
    return p.parse_args()


def build_tokenizer():
    vocab = {tok: i for i, tok in enumerate(SPECIALS + sorted(set(WORDS)))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>",
                                   bos_token="<s>", eos_token="</s>")


def refresh_checkpoint(ckpt_dir, seed):
    tok = build_tokenizer()
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      max_position_embeddings=64, pad_token_id=tok.pad_token_id,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = LlamaForCausalLM(cfg)
    os.makedirs(ckpt_dir, exist_ok=True)
    model.save_pretrained(ckpt_dir)
    tok.save_pretrained(ckpt_dir)
    with open(os.path.join(ckpt_dir, "rerank_meta.json"), "w") as fh:
        json.dump({"seed": seed, "created": time.time()}, fh)
    return ckpt_dir


def batched(items, size):
    for start in range(0, len(items), size):
        yield items[start:start + size]


def score_worker(ckpt_dir, device, max_length, seed, settings):
    torch.manual_seed(seed)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    tok = AutoTokenizer.from_pretrained(ckpt_dir)
    model = AutoModelForCausalLM.from_pretrained(ckpt_dir).to(device).eval()
    print(f"[worker {os.getpid()}] loaded {type(model).__name__} from {ckpt_dir}", flush=True)

    results = {}
    for qid, cands in CANDIDATES.items():
        texts = [settings["prefix"] + c for c in cands]
        losses = []
        for chunk in batched(texts, settings["batch_size"]):
            enc = tok(chunk, padding=True, truncation=True, max_length=max_length,
                      return_tensors="pt").to(device)
            lab = tok(chunk, padding=settings["label_padding"], truncation=True,
                      max_length=max_length, return_tensors="pt")["input_ids"].to(device)
            lab[lab == tok.pad_token_id] = settings["ignore_index"]
            with torch.no_grad():
                out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                            labels=lab)
            losses.append(out.loss.item())
        results[qid] = sorted(zip(losses, cands))
        print(f"[worker] {qid}: best={results[qid][0][1]!r}", flush=True)

    with open(os.path.join(ckpt_dir, "scores.json"), "w") as fh:
        json.dump(results, fh, indent=2)


def main():
    args = parse_args()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["OMP_NUM_THREADS"] = "1"

    ckpt = refresh_checkpoint(args.ckpt_dir, args.seed)
    settings = {
        "prefix": "",
        "batch_size": args.batch_size,
        "label_padding": "max_length",  # keep label tensors a fixed size for logging
        "ignore_index": -100,
    }
    ctx = mp.get_context("spawn")
    proc = ctx.Process(target=score_worker,
                       args=(ckpt, args.device, args.max_length, args.seed, settings),
                       name="rerank-scorer")
    t0 = time.time()
    proc.start()
    proc.join()
    print(f"scorer finished in {time.time() - t0:.1f}s with exit code {proc.exitcode}")
    if proc.exitcode != 0:
        sys.exit(proc.exitcode)
    with open(os.path.join(ckpt, "scores.json")) as fh:
        print(json.dumps(json.load(fh), indent=2))


if __name__ == "__main__":
    main()
