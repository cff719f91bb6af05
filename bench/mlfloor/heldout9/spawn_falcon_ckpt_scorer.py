"""Nightly prompt scorer for the support-macro language model (tiny Falcon, word vocab built in code).

The parent fine-tunes the model for a few steps on the macro corpus, writes one training checkpoint
(weights, vocabulary, architecture and the run's arguments, so a run can be traced back), and hands
scoring to a spawned child: scoring runs next to the trainer on the shared box, in its own process,
so a crash in scoring never takes the trainer with it.

    python spawn_falcon_ckpt_scorer.py --steps 6 --max-len 24
"""
import argparse
import logging
import math
import multiprocessing as mp
import os
import shutil
import tempfile
import time

import torch
from transformers import FalconConfig, FalconForCausalLM

log = logging.getLogger("macro-scorer")

ARCH = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, new_decoder_architecture=False,
            multi_query=True, parallel_attn=True, bias=False, max_position_embeddings=64)
SCORER = {
    "report_every": 2,
    "prompts": ["thanks for reaching out we have reset your password",
                "your refund was sent to the original card",
                "please restart the app and try again",
                "we could not find an order with that number"],
}
MACROS = [
    "thanks for reaching out we have reset your password and sent a link to your email",
    "your refund was sent to the original card and should arrive in five days",
    "please restart the app and try again if the problem stays send us a screenshot",
    "we could not find an order with that number please check the confirmation email",
    "your subscription renews on the first of the month you can cancel any time",
    "the courier has your parcel and will deliver it tomorrow before noon",
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=3)
    p.add_argument("--max-len", type=int, default=24)
    p.add_argument("--seed", type=int, default=11)
    return p.parse_args()


def build_vocab(texts):
    words = sorted({w for t in texts for w in t.split()})
    vocab = {"<pad>": 0, "<unk>": 1, "<s>": 2}
    for w in words:
        vocab[w] = len(vocab)
    return vocab


def encode(text, vocab, max_len):
    ids = [vocab["<s>"]] + [vocab.get(w, vocab["<unk>"]) for w in text.split()]
    ids = ids[:max_len]
    mask = [1] * len(ids) + [0] * (max_len - len(ids))
    return ids + [vocab["<pad>"]] * (max_len - len(ids)), mask


def make_batch(texts, vocab, max_len):
    ids, masks = zip(*(encode(t, vocab, max_len) for t in texts))
    input_ids, attention_mask = torch.tensor(ids), torch.tensor(masks)
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    return input_ids, attention_mask, labels


def finetune(model, vocab, args):
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    for step in range(args.steps):
        start = (step * args.batch_size) % len(MACROS)
        texts = (MACROS + MACROS)[start:start + args.batch_size]
        input_ids, attention_mask, labels = make_batch(texts, vocab, args.max_len)
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        log.info("step %d loss %.3f", step, loss.item())
    return model


def score_worker(ckpt_path, max_len, prompts, report_every, results):
    """Runs in the spawned child: rebuild the model from the checkpoint and score each prompt."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [scorer] %(message)s")
    state = torch.load(ckpt_path, map_location="cpu")
    vocab = state["vocab"]
    model = FalconForCausalLM(FalconConfig(vocab_size=len(vocab), **state["arch"]))
    model.load_state_dict(state["model_state"])
    model.eval()
    for i, prompt in enumerate(prompts):
        input_ids, attention_mask, labels = make_batch([prompt], vocab, max_len)
        with torch.no_grad():
            loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        results.put((prompt, math.exp(loss.item())))
        if (i + 1) % report_every == 0:
            log.info("scored %d/%d prompts", i + 1, len(prompts))
    results.put(None)


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [trainer] %(message)s")
    torch.manual_seed(args.seed)
    # the scorer must not fight the trainer for cores, and the run id ties its report to this run
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["SCORER_RUN_ID"] = f"nightly-{args.seed}-{args.steps}"
    vocab = build_vocab(MACROS + SCORER["prompts"])
    model = FalconForCausalLM(FalconConfig(vocab_size=len(vocab), **ARCH))
    log.info("falcon: %d parameters, vocab %d", sum(p.numel() for p in model.parameters()), len(vocab))
    finetune(model, vocab, args)

    work_dir = tempfile.mkdtemp(prefix="macro-scorer-")
    try:
        ckpt_path = os.path.join(work_dir, "checkpoint.pt")
        torch.save({"model_state": model.state_dict(), "vocab": vocab, "arch": ARCH, "args": args,
                    "saved_at": time.time()}, ckpt_path)
        log.info("checkpoint written (%d bytes)", os.path.getsize(ckpt_path))

        ctx = mp.get_context("spawn")
        results = ctx.Queue()
        child = ctx.Process(target=score_worker, name="score-worker",
                            args=(ckpt_path, args.max_len, SCORER["prompts"], SCORER["report_every"], results))
        child.start()
        scores = []
        while child.is_alive() or not results.empty():
            try:
                item = results.get(timeout=0.5)
            except Exception:
                continue
            if item is None:
                break
            scores.append(item)
        child.join()
        if child.exitcode != 0:
            log.error("scorer exited with %s after %d prompts", child.exitcode, len(scores))
            raise SystemExit(1)
        for prompt, ppl in sorted(scores, key=lambda s: s[1]):
            log.info("ppl %7.2f  %s", ppl, prompt)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
