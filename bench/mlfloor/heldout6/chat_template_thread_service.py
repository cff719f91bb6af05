"""In-process chat helper for the ticket UI: a worker thread owns a tiny Gemma model and a BPE
tokenizer trained in code on our macros, and answers chat requests taken from a queue.

We keep two chat templates on the tokenizer (plain chat and a 'summarize the ticket' one), as the
hub models with several templates do.

    python chat_template_thread_service.py --requests 3
"""
import argparse
import logging
import queue
import sys
import threading
import time

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GemmaConfig, GemmaForCausalLM, PreTrainedTokenizerFast

log = logging.getLogger("chat-helper")

MACROS = [
    "thanks for contacting us we are looking into it",
    "could you send a screenshot of the error",
    "your refund has been processed",
    "we have escalated the ticket to engineering",
    "please clear the cache and log in again",
    "the issue is fixed in the latest version",
]
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]

TEMPLATES = {
    "chat": ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }} "
             "{{ m['content'] }}<end_of_turn>{% endfor %}"
             "{% if add_generation_prompt %}<start_of_turn>model {% endif %}"),
    "summarize": ("{{ bos_token }}<start_of_turn>user summarize: "
                  "{% for m in messages %}{{ m['content'] }} {% endfor %}<end_of_turn>"
                  "<start_of_turn>model "),
}

MODEL = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=1, head_dim=8, max_position_embeddings=128)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--vocab-size", type=int, default=120)
    ap.add_argument("--max-new-tokens", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=30.0)
    return ap.parse_args()


def build_tokenizer(texts, vocab_size):
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Metaspace()
    tk.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False)
    tk.train_from_iterator(texts + ["user model summarize :"], trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<bos>", eos_token="<eos>",
                                  pad_token="<pad>", unk_token="<unk>",
                                  additional_special_tokens=["<start_of_turn>", "<end_of_turn>"])
    tok.chat_template = dict(TEMPLATES)
    return tok


class ChatWorker(threading.Thread):
    def __init__(self, tok, model, requests, responses, max_new_tokens):
        super().__init__(name="chat-worker", daemon=True)
        self.tok, self.model = tok, model
        self.requests, self.responses = requests, responses
        self.max_new_tokens = max_new_tokens

    def run(self):
        while True:
            req = self.requests.get()
            if req is None:
                return
            t0 = time.time()
            enc = self.tok.apply_chat_template(req["messages"], add_generation_prompt=True,
                                               return_tensors="pt", return_dict=True)
            with torch.no_grad():
                out = self.model.generate(**enc, max_new_tokens=self.max_new_tokens,
                                          do_sample=False, pad_token_id=self.tok.pad_token_id)
            text = self.tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            self.responses.put({"id": req["id"], "text": text, "secs": time.time() - t0})


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")
    torch.manual_seed(0)
    tok = build_tokenizer(MACROS, args.vocab_size)
    log.info("tokenizer: %d tokens, templates %s", len(tok), sorted(TEMPLATES))
    model = GemmaForCausalLM(GemmaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                                         bos_token_id=tok.bos_token_id,
                                         eos_token_id=tok.eos_token_id, **MODEL)).eval()

    requests, responses = queue.Queue(), queue.Queue()
    worker = ChatWorker(tok, model, requests, responses, args.max_new_tokens)
    worker.start()
    for i in range(args.requests):
        requests.put({"id": i, "messages": [
            {"role": "user", "content": MACROS[i % len(MACROS)]},
        ]})
    requests.put(None)

    answers = {}
    deadline = time.time() + args.timeout
    while len(answers) < args.requests and time.time() < deadline:
        try:
            item = responses.get(timeout=0.2)
        except queue.Empty:
            if not worker.is_alive():
                break
            continue
        answers[item["id"]] = item
    if len(answers) < args.requests:
        log.error("chat worker stopped after %d of %d answers", len(answers), args.requests)
        sys.exit(1)
    for i in range(args.requests):
        print(f"#{i}: {answers[i]['text']!r} ({answers[i]['secs']:.2f}s)")


if __name__ == "__main__":
    main()
