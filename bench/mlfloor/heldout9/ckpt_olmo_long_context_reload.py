"""Release-notes LM: train short, evaluate long (tiny OLMo, word vocab built in code).

The model is trained on 16-token windows of the changelog and exported with save_pretrained. For the
long-context check it is reloaded with linear RoPE scaling (positions interpolated by --context-factor)
and its perplexity is compared on windows longer than anything it saw in training.

    python ckpt_olmo_long_context_reload.py --steps 10 --context-factor 2.0
"""
import argparse
import json
import logging
import math
import os
import shutil
import tempfile

import torch
from transformers import OlmoConfig, OlmoForCausalLM

log = logging.getLogger("notes-lm")

ARCH = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=16, pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
EXPORT = {"folder": "notes-lm", "rope": {"rope_type": "linear"}}
CHANGELOG = """fixed a crash when the export folder is missing . added a retry for slow uploads . the search box
now ignores case . fixed the date picker on small screens . dark mode follows the system setting . the csv export
keeps leading zeros . fixed a memory leak in the preview pane . uploads resume after a network drop . the sidebar
remembers its width . fixed sorting by size in the file list . added keyboard shortcuts for the editor . the
login page loads faster . fixed a typo in the billing email . large folders open in the background .""".split()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--context-factor", type=float, default=2.0)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--seed", type=int, default=13)
    return p.parse_args()


def build_vocab(words):
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for w in words:
        vocab.setdefault(w, len(vocab))
    return vocab


def windows(ids, size, stride):
    return [ids[i:i + size] for i in range(0, len(ids) - size + 1, stride)]


def train(model, ids, args):
    data = torch.tensor(windows(ids, args.window, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    model.train()
    for step in range(args.steps):
        batch = data[torch.randint(0, data.size(0), (4,), generator=gen)]
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step % 3 == 0:
            log.info("step %d loss %.3f", step, loss.item())
    return model.eval()


@torch.no_grad()
def perplexity(model, ids, size):
    chunks = torch.tensor(windows(ids, size, size))
    return math.exp(model(input_ids=chunks, labels=chunks).loss.item())


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(args.seed)
    vocab = build_vocab(CHANGELOG)
    ids = [vocab[w] for w in CHANGELOG]
    model = train(OlmoForCausalLM(OlmoConfig(vocab_size=len(vocab), **ARCH)), ids, args)
    short_ppl = perplexity(model, ids, args.window)
    log.info("perplexity at %d tokens: %.2f", args.window, short_ppl)

    work = tempfile.mkdtemp(prefix="notes-lm-")
    try:
        export_dir = os.path.join(work, EXPORT["folder"])
        model.save_pretrained(export_dir)
        with open(os.path.join(export_dir, "vocab.json"), "w") as f:
            json.dump(vocab, f)
        log.info("exported %s", sorted(os.listdir(export_dir)))

        long_len = int(args.window * args.context_factor)
        rope_scaling = dict(EXPORT["rope"], factor=args.context_factor)
        long_model = OlmoForCausalLM.from_pretrained(export_dir, rope_scaling=rope_scaling,
                                                     max_position_embeddings=long_len)
        log.info("reloaded with %s, %d positions", long_model.config.rope_parameters, long_len)
        with open(os.path.join(export_dir, "vocab.json")) as f:
            reloaded_vocab = json.load(f)
        assert reloaded_vocab == vocab
        long_ppl = perplexity(long_model, ids, long_len)
        base_ppl = perplexity(model, ids, long_len)
        log.info("perplexity at %d tokens: scaled %.2f vs unscaled %.2f (short %.2f)", long_len, long_ppl,
                 base_ppl, short_ppl)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
