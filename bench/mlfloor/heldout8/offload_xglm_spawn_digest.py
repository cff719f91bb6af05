"""Nightly release-note digest: a small XGLM writes one-line digests in a spawn worker, with offload.

The job runner has little RAM, so the worker loads the checkpoint with a device_map that keeps the
embeddings and the first block in memory and offloads the rest to disk, in bfloat16. The parent
prepares the environment for the worker (a private HF_HOME, no tokenizer threads, the job id the
log shipper reads), checks for a GPU to pick the device map, fine-tunes and saves the checkpoint,
then starts the worker and collects its digests from a queue.

    python offload_xglm_spawn_digest.py --max-new-tokens 8
"""
import argparse
import logging
import multiprocessing as mp
import os
import queue
import shutil
import sys
import tempfile

import torch
from transformers import XGLMConfig, XGLMForCausalLM

log = logging.getLogger("release-digest")

ARCH = dict(d_model=32, num_layers=3, attention_heads=4, ffn_dim=64, max_position_embeddings=64)

NOTES = [
    "fixed crash when exporting large reports",
    "added dark mode to the settings page",
    "improved search speed for long queries",
    "removed the legacy sync option",
    "fixed wrong totals in the monthly invoice",
]

# everything the CPU box cannot hold goes to the offload folder
CPU_DEVICE_MAP = {"model.embed_tokens": "cpu", "model.embed_positions": "cpu", "model.layers.0": "cpu",
                  "model.layers.1": "disk", "model.layers.2": "disk", "model.layer_norm": "cpu", "lm_head": "cpu"}


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--max-new-tokens", type=int, default=8)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=2)
    return p.parse_args()


def build_vocab():
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for note in NOTES:
        for w in note.split():
            vocab.setdefault(w, len(vocab))
    return vocab


def finetune_and_save(ckpt_dir, vocab, args):
    torch.manual_seed(args.seed)
    config = XGLMConfig(vocab_size=len(vocab), bos_token_id=0, pad_token_id=1, eos_token_id=2, **ARCH)
    model = XGLMForCausalLM(config)
    rows = [[0] + [vocab[w] for w in n.split()] + [2] for n in NOTES]
    width = max(map(len, rows))
    ids = torch.tensor([r + [1] * (width - len(r)) for r in rows])
    mask = (ids != 1).long()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(args.steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        log.info("finetune step %d loss %.3f", step, loss.item())
    model.save_pretrained(ckpt_dir)


def digest_worker(ckpt_dir, offload_dir, device_map, dtype_name, prompts, max_new_tokens, results):
    torch.set_num_threads(1)
    job = os.environ.get("DIGEST_JOB_ID", "?")
    model = XGLMForCausalLM.from_pretrained(ckpt_dir, device_map=device_map, offload_folder=offload_dir,
                                            dtype=getattr(torch, dtype_name))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.to(device).eval()
    for i, prompt in enumerate(prompts):
        ids = torch.tensor([prompt], device=device)
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                 do_sample=False, pad_token_id=1)
        results.put((job, i, out[0, ids.shape[1]:].tolist()))
    results.put(None)


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(message)s")
    work = tempfile.mkdtemp(prefix="digest-job-")
    os.environ["HF_HOME"] = os.path.join(work, "hf_home")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["DIGEST_JOB_ID"] = "nightly-0412"
    has_gpu = torch.cuda.is_available()
    device_map = "auto" if has_gpu else CPU_DEVICE_MAP
    log.info("gpu: %s, device map: %s", has_gpu, device_map if has_gpu else "cpu+disk")
    try:
        vocab = build_vocab()
        inv = {i: w for w, i in vocab.items()}
        ckpt_dir, offload_dir = os.path.join(work, "ckpt"), os.path.join(work, "offload")
        finetune_and_save(ckpt_dir, vocab, args)
        prompts = [[0] + [vocab[w] for w in n.split()[:3]] for n in NOTES]
        ctx = mp.get_context("spawn")
        results = ctx.Queue()
        worker = ctx.Process(target=digest_worker, name="digest-worker",
                             args=(ckpt_dir, offload_dir, device_map, args.dtype, prompts,
                                   args.max_new_tokens, results))
        worker.start()
        digests = {}
        while worker.is_alive() or not results.empty():
            try:
                item = results.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is None:
                break
            job, i, new_ids = item
            digests[i] = " ".join(inv.get(t, "?") for t in new_ids)
            log.info("[%s] %s -> %s", job, NOTES[i], digests[i])
        worker.join(timeout=args.timeout)
        if worker.exitcode != 0:
            log.error("digest worker exited with %s after %d digests", worker.exitcode, len(digests))
            sys.exit(1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
