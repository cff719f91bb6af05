"""Two LoRA adapters on one tiny Mistral (support replies and billing replies), trained one after
the other, saved, reloaded onto a fresh base, compared one by one by switching adapters; the one
with the best perplexity on all replies is merged into the base for export.

    python lora_mistral_merge_cleanup.py --steps 4
"""
import argparse
import logging
import math
import shutil
import tempfile
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import MistralConfig, MistralForCausalLM

log = logging.getLogger("lora-mix")

BASE = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=None)

# per-task LoRA settings; billing has far less data, so it got a smaller rank
TASKS = {
    "support": {"r": 8, "lora_alpha": 16, "texts": [
        "please restart the router and wait a minute",
        "your ticket has been escalated to the network team",
        "we have reset your password please check your email",
        "the outage in your area has been fixed",
    ]},
    "billing": {"r": 4, "lora_alpha": 8, "texts": [
        "your refund was issued to the original card",
        "the invoice for march is now available",
        "we removed the late fee from your account",
    ]},
}
TARGETS = ["q_proj", "v_proj", "o_proj"]


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--seed", type=int, default=5)
    return ap.parse_args()


def build_vocab():
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for task in TASKS.values():
        for t in task["texts"]:
            for w in t.split():
                vocab.setdefault(w, len(vocab))
    return vocab


def batch_for(texts, vocab):
    seqs = [[1] + [vocab[w] for w in t.split()] + [2] for t in texts]
    width = max(map(len, seqs))
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def new_base(vocab, seed):
    torch.manual_seed(seed)
    return MistralForCausalLM(MistralConfig(vocab_size=len(vocab), pad_token_id=0, bos_token_id=1,
                                            eos_token_id=2, **BASE))


def train_adapter(name, task, vocab, args, out_root):
    model = get_peft_model(new_base(vocab, args.seed),
                           LoraConfig(r=task["r"], lora_alpha=task["lora_alpha"],
                                      target_modules=TARGETS, lora_dropout=0.0,
                                      task_type="CAUSAL_LM"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    batch = batch_for(task["texts"], vocab)
    for step in range(args.steps):
        loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    log.info("adapter %s: r=%d final loss %.3f", name, task["r"], loss.item())
    path = out_root / name
    model.save_pretrained(path)
    return path


@torch.no_grad()
def perplexity(model, batch):
    model.eval()
    return math.exp(model(**batch).loss.item())


def all_texts():
    return [t for task in TASKS.values() for t in task["texts"]]


def perplexity_with(model, name, vocab):
    model.set_adapter(name)
    return perplexity(model, batch_for(all_texts(), vocab))


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    vocab = build_vocab()
    out_root = Path(tempfile.mkdtemp(prefix="lora-mix-"))
    try:
        paths = {name: train_adapter(name, task, vocab, args, out_root) for name, task in TASKS.items()}

        names = list(paths)
        model = PeftModel.from_pretrained(new_base(vocab, args.seed), paths[names[0]],
                                          adapter_name=names[0])
        for name in names[1:]:
            model.load_adapter(paths[name], adapter_name=name)
        for name in names:
            model.set_adapter(name)
            scores = {t: perplexity(model, batch_for(TASKS[t]["texts"], vocab)) for t in names}
            log.info("adapter %-8s ppl %s", name, {k: round(v, 2) for k, v in scores.items()})

        best = min(names, key=lambda n: perplexity_with(model, n, vocab))
        log.info("exporting adapter %s merged into the base", best)
        merged = model.merge_and_unload(adapter_names=[best])
        # drop every adapter's weights so the export holds the merged base only
        for name in names:
            merged.delete_adapter(name)
        merged.save_pretrained(out_root / f"{best}-merged")
        log.info("exported merged model, ppl on all texts %.2f",
                 perplexity(merged, batch_for(all_texts(), vocab)))
    finally:
        shutil.rmtree(out_root, ignore_errors=True)


if __name__ == "__main__":
    main()
