"""Low-memory inference box: the parent saves a (tiny) Phi checkpoint, then a spawned worker loads
it with device_map="auto" under a memory budget, so what does not fit in RAM is paged from disk,
and answers one prompt.

The budgets come from the command line so ops can tune them per box:

    python offload_phi_spawn_worker.py --cpu-mem 40KiB --max-new-tokens 6
"""
import argparse
import logging
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time

import torch
from transformers import PhiConfig, PhiForCausalLM

log = logging.getLogger("offload-box")

ARCH = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
    "partial_rotary_factor": 0.5,
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
}

WORDS = ("<pad> <s> </s> what is the status of my order it ships tomorrow today "
         "please wait thanks hello").split()

ENV = {
    "OMP_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "warning",
}


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu-mem", default="20GiB")
    ap.add_argument("--cpu-mem", default="40KiB", help="RAM budget for weights; the rest goes to disk")
    ap.add_argument("--max-new-tokens", type=int, default=6)
    ap.add_argument("--prompt", default="what is the status of my order")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=120.0)
    return ap.parse_args()


def memory_budget(gpu_mem, cpu_mem):
    """Same limits as the GPU box: accelerate fills GPU 0, then RAM, and pages the rest from disk."""
    return {0: gpu_mem, "cpu": cpu_mem}


def save_checkpoint(path, seed):
    torch.manual_seed(seed)
    config = PhiConfig(vocab_size=len(WORDS), pad_token_id=0, bos_token_id=1, eos_token_id=2,
                       **ARCH)
    model = PhiForCausalLM(config)
    model.save_pretrained(path, max_shard_size="200KB")
    n = sum(p.numel() for p in model.parameters())
    log.info("saved %d-parameter checkpoint with %d shards", n,
             len([f for f in os.listdir(path) if f.endswith(".safetensors")]))


def worker(ckpt_dir, offload_dir, max_memory, prompt_ids, max_new_tokens, result_q):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(message)s")
    t0 = time.time()
    model = PhiForCausalLM.from_pretrained(ckpt_dir, device_map="auto", max_memory=max_memory,
                                           offload_folder=offload_dir, dtype=torch.float32)
    model.eval()
    log.info("loaded in %.1fs: %s", time.time() - t0, getattr(model, "hf_device_map", None))
    ids = torch.tensor([prompt_ids])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False, pad_token_id=0)
    result_q.put(out[0, ids.shape[1]:].tolist())


def main():
    args = parse_args()
    for k, v in ENV.items():
        os.environ.setdefault(k, v)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s parent %(message)s")
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    log.info("main device %s", device)

    vocab = {w: i for i, w in enumerate(WORDS)}
    prompt_ids = [vocab["<s>"]] + [vocab.get(w, 0) for w in args.prompt.split()]
    work = tempfile.mkdtemp(prefix="offload-box-")
    ckpt_dir, offload_dir = os.path.join(work, "ckpt"), os.path.join(work, "offload")
    try:
        save_checkpoint(ckpt_dir, args.seed)
        max_memory = memory_budget(args.gpu_mem, args.cpu_mem)
        ctx = mp.get_context("spawn")
        result_q = ctx.Queue()
        proc = ctx.Process(target=worker, args=(ckpt_dir, offload_dir, max_memory, prompt_ids,
                                                args.max_new_tokens, result_q))
        proc.start()
        proc.join(args.timeout)
        if proc.is_alive():
            proc.terminate()
            log.error("worker timed out")
            sys.exit(2)
        if proc.exitcode != 0:
            log.error("worker failed with exit code %s", proc.exitcode)
            sys.exit(1)
        new_ids = result_q.get(timeout=5)
        print("answer:", " ".join(WORDS[i] for i in new_ids))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
