"""Tiny FAQ answering service: a T5 model served by a worker process from a request queue.

The parent prepares the model folder (model, tokenizer and the generation settings the service
should use, merged from our defaults and the deployment's overrides), starts the worker and
feeds it requests; the worker answers each one with model.generate.

    python gen_service_worker.py --requests 4
"""
import argparse
import logging
import multiprocessing as mp
import os
import queue
import shutil
import sys
import tempfile
import time

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import (AutoTokenizer, GenerationConfig, PreTrainedTokenizerFast, T5Config,
                          T5ForConditionalGeneration)

DEFAULT_GEN = {"do_sample": True, "temperature": 0.7, "top_p": 0.9, "max_new_tokens": 16,
               "repetition_penalty": 1.1}

SERVICE = {
    "model": dict(d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=4,
                  dropout_rate=0.0),
    # ops asked for reproducible answers in the support widget
    "generation": {"temperature": 0.0, "max_new_tokens": 12},
    "warmup_request": "hello",
}

PROMPTS = [
    "question: how do i reset my password",
    "question: when will my order arrive",
    "question: can i change my delivery address",
    "question: how do i cancel my plan",
    "question: where is my invoice",
]

log = logging.getLogger("faq-service")


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--poll", type=float, default=0.5, help="seconds between liveness checks")
    return ap.parse_args()


def build_tokenizer(texts):
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for t in texts:
        for w in t.replace(":", " : ").split():
            vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(single="$A </s>",
                                                      special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="</s>",
                                   unk_token="<unk>")


def prepare_model_dir(path, seed):
    torch.manual_seed(seed)
    tok = build_tokenizer(PROMPTS)
    config = T5Config(vocab_size=len(tok), decoder_start_token_id=0, pad_token_id=0,
                      eos_token_id=1, **SERVICE["model"])
    model = T5ForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        **{**DEFAULT_GEN, **SERVICE["generation"]}, decoder_start_token_id=0, pad_token_id=0,
        eos_token_id=1)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    log.info("model folder ready: %d parameters", sum(p.numel() for p in model.parameters()))


def serve(model_dir, requests, responses, threads):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(message)s")
    torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = T5ForConditionalGeneration.from_pretrained(model_dir).eval()
    log.info("worker loaded model, generation config: %s",
             model.generation_config.to_diff_dict())
    while True:
        req = requests.get()
        if req is None:
            break
        t0 = time.time()
        enc = tok(req["text"], return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**enc, **req.get("params", {}))
        answer = tok.decode(out[0], skip_special_tokens=True)
        responses.put({"id": req["id"], "answer": answer, "secs": time.time() - t0})
    log.info("worker stopping")


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s parent %(message)s")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    model_dir = tempfile.mkdtemp(prefix="faq-model-")
    try:
        prepare_model_dir(model_dir, args.seed)
        ctx = mp.get_context("spawn")
        requests, responses = ctx.Queue(), ctx.Queue()
        worker = ctx.Process(target=serve, args=(model_dir, requests, responses, 1), daemon=True)
        worker.start()

        requests.put({"id": -1, "text": SERVICE["warmup_request"]})
        for i in range(args.requests):
            requests.put({"id": i, "text": PROMPTS[i % len(PROMPTS)],
                          "params": {"num_beams": 1}})
        requests.put(None)

        answers = {}
        while len(answers) < args.requests + 1:
            try:
                item = responses.get(timeout=args.poll)
            except queue.Empty:
                if not worker.is_alive():
                    break
                continue
            answers[item["id"]] = item
        worker.join()
        if worker.exitcode != 0:
            log.error("worker died with exit code %s after %d answers", worker.exitcode,
                      len(answers))
            sys.exit(1)
        for i in range(args.requests):
            print(f"{PROMPTS[i % len(PROMPTS)]!r} -> {answers[i]['answer']!r}")
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
