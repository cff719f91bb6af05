"""Reply-suggestion service for the helpdesk: a tiny BLOOM served from a spawn worker.

The parent fine-tunes the suggestion model for a few steps on canned replies and saves it, builds
the GenerationConfig from the command line, and starts the serving process; requests (ticket
openings) go in through a queue and suggestions come back through another. In production the
requests come from the ticket webhook; here a few recorded ones are replayed.

    python gen_bloom_reply_service.py --max-length 24 --num-beams 2
"""
import argparse
import logging
import multiprocessing as mp
import queue
import shutil
import sys
import tempfile
import time

import torch
from transformers import BloomConfig, BloomForCausalLM, GenerationConfig

log = logging.getLogger("reply-service")

MODEL = dict(hidden_size=32, n_layer=2, n_head=4, layer_norm_epsilon=1e-5)

REPLIES = [
    "hello thanks for contacting support we are looking into your ticket now",
    "hello sorry for the trouble please try to log out and log in again",
    "hello your refund was issued and should arrive within five days",
    "hello we have escalated your ticket to the billing team",
    "hello please send us a screenshot of the error message",
]

# replayed from last week's webhook log
REQUESTS = [
    "my invoice is wrong",
    "cannot log in since the update",
    "hello i ordered the annual plan last month and was charged twice once on the first and once on "
    "the third so please refund the second charge and tell me why this happened and whether it will "
    "happen again next year",
    "where is my refund",
]


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--max-length", type=int, default=24, help="suggestion length cap in tokens")
    p.add_argument("--num-beams", type=int, default=2)
    p.add_argument("--repetition-penalty", type=float, default=1.3)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--poll", type=float, default=0.5)
    return p.parse_args()


def build_vocab(texts):
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for t in texts:
        for w in t.split():
            vocab.setdefault(w, len(vocab))
    return vocab


def encode(text, vocab):
    return [vocab["<s>"]] + [vocab.get(w, vocab["<unk>"]) for w in text.split()]


def finetune_and_save(out_dir, vocab, args):
    torch.manual_seed(args.seed)
    config = BloomConfig(vocab_size=len(vocab), pad_token_id=0, bos_token_id=1, eos_token_id=2, **MODEL)
    model = BloomForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rows = [encode(t, vocab) + [vocab["</s>"]] for t in REPLIES]
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = (ids != 0).long()
    for step in range(args.steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        log.info("finetune step %d loss %.3f", step, loss.item())
    model.save_pretrained(out_dir)


def serve(model_dir, gen_config, requests, answers):
    torch.set_num_threads(1)
    model = BloomForCausalLM.from_pretrained(model_dir)
    model.eval()
    while True:
        req = requests.get()
        if req is None:
            break
        ids = torch.tensor([req["ids"]])
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=gen_config)
        answers.put({"id": req["id"], "ids": out[0, ids.shape[1]:].tolist()})


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(message)s")
    vocab = build_vocab(REPLIES + REQUESTS)
    inv = {i: w for w, i in vocab.items()}
    gen_config = GenerationConfig(max_length=args.max_length, num_beams=args.num_beams,
                                  repetition_penalty=args.repetition_penalty, do_sample=False,
                                  pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model_dir = tempfile.mkdtemp(prefix="reply-model-")
    try:
        finetune_and_save(model_dir, vocab, args)
        ctx = mp.get_context("spawn")
        requests, answers = ctx.Queue(), ctx.Queue()
        worker = ctx.Process(target=serve, args=(model_dir, gen_config, requests, answers), name="server")
        worker.start()
        for i, text in enumerate(REQUESTS):
            requests.put({"id": i, "ids": encode(text, vocab)})
        requests.put(None)
        done = {}
        t0 = time.time()
        while len(done) < len(REQUESTS):
            try:
                ans = answers.get(timeout=args.poll)
            except queue.Empty:
                if not worker.is_alive():
                    break
                continue
            done[ans["id"]] = " ".join(inv.get(i, "?") for i in ans["ids"])
            log.info("request %d -> %s", ans["id"], done[ans["id"]])
        worker.join(timeout=10)
        log.info("%d/%d suggestions in %.1fs", len(done), len(REQUESTS), time.time() - t0)
        if worker.exitcode != 0:
            log.error("server died with exit code %s", worker.exitcode)
            sys.exit(1)
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
