"""Two-stage LoRA pipeline for the product-FAQ bot.

Stage 1 ("domain"): LoRA on a small OPT base with the FAQ answers, save the adapter, merge it into
the base and save the merged checkpoint, which becomes the new base. Stage 2 ("style"): reload the
merged checkpoint, train a cheaper adapter on the support team's short-reply style, then blend it
with the domain adapter for the A/B variant and print a few greedy answers.

    python peft_merge_blend.py --workdir faq_run --steps 3
"""
import argparse
import logging
import os
import time

import torch
from peft import LoraConfig, PeftModel, TaskType, get_peft_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, OPTConfig, OPTForCausalLM, PreTrainedTokenizerFast

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
logger = logging.getLogger("faq-lora")

BASE = dict(hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=64, word_embed_proj_dim=32, dropout=0.0)

STAGES = {
    "domain": {"r": 8, "lora_alpha": 16, "lora_dropout": 0.05, "lr": 5e-4,
               "target_modules": ["q_proj", "v_proj"]},
    # the style adapter is tiny on purpose: it only has to shorten the answers
    "style": {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "lr": 1e-3,
              "target_modules": ["q_proj", "v_proj"]},
}
BLEND = {"weights": [0.7, 0.3], "combination_type": "linear"}

FAQ = [
    ("how long does shipping take", "standard shipping takes three to five business days"),
    ("can i change my order", "you can change your order within one hour of purchase"),
    ("do you ship abroad", "we ship to most countries in europe and north america"),
    ("how do i reset my password", "use the forgot password link on the login page"),
    ("where is my refund", "refunds reach your card within ten business days"),
]
STYLE = [
    ("how long does shipping take", "three to five days"),
    ("do you ship abroad", "yes to europe and north america"),
    ("where is my refund", "within ten business days"),
]


def build_tokenizer():
    words = sorted({w for q, a in FAQ + STYLE for w in (q + " " + a).split()})
    vocab = {t: i for i, t in enumerate(["<pad>", "</s>", "<unk>", "<sep>"] + words)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="</s>",
                                   bos_token="</s>", unk_token="<unk>", sep_token="<sep>")


def encode_pairs(tok, pairs):
    texts = [f"{q} <sep> {a} </s>" for q, a in pairs]
    enc = tok(texts, padding=True, return_tensors="pt")
    labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
    return enc, labels


def lora_config(name):
    s = STAGES[name]
    return LoraConfig(task_type=TaskType.CAUSAL_LM, r=s["r"], lora_alpha=s["lora_alpha"],
                      lora_dropout=s["lora_dropout"], target_modules=s["target_modules"])


def train(model, tok, pairs, lr, steps):
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    enc, labels = encode_pairs(tok, pairs)
    model.train()
    for step in range(steps):
        loss = model(**enc, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        logger.info("  step %d loss %.4f", step, loss.item())
    model.eval()
    return loss.item()


def stage_domain(tok, workdir, steps):
    torch.manual_seed(0)
    base = OPTForCausalLM(OPTConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                                    bos_token_id=tok.bos_token_id,
                                    eos_token_id=tok.eos_token_id, **BASE))
    model = get_peft_model(base, lora_config("domain"), adapter_name="domain")
    model.print_trainable_parameters()
    train(model, tok, FAQ, STAGES["domain"]["lr"], steps)
    adapter_dir = os.path.join(workdir, "adapters")
    model.save_pretrained(adapter_dir)
    merged = model.merge_and_unload()
    merged_dir = os.path.join(workdir, "merged")
    merged.save_pretrained(merged_dir)
    tok.save_pretrained(merged_dir)
    logger.info("stage 1 done: adapter in %s, merged base in %s", adapter_dir, merged_dir)
    return os.path.join(adapter_dir, "domain"), merged_dir


def stage_style(tok, merged_dir, domain_dir, steps):
    base = AutoModelForCausalLM.from_pretrained(merged_dir)
    model = get_peft_model(base, lora_config("style"), adapter_name="style")
    train(model, tok, STYLE, STAGES["style"]["lr"], steps)
    # bring the domain adapter back so the A/B variant can weigh both
    model.load_adapter(domain_dir, adapter_name="domain")
    model.add_weighted_adapter(["domain", "style"], BLEND["weights"], adapter_name="blend",
                               combination_type=BLEND["combination_type"])
    model.set_adapter("blend")
    return model


@torch.no_grad()
def answer(model, tok, question, max_new_tokens=8):
    enc = tok([f"{question} <sep>"], return_tensors="pt")
    out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                         pad_token_id=tok.pad_token_id)
    return tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default="faq_run")
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    t0 = time.time()
    tok = build_tokenizer()
    domain_dir, merged_dir = stage_domain(tok, args.workdir, args.steps)
    model = stage_style(tok, merged_dir, domain_dir, args.steps)
    for q, _ in FAQ[:3]:
        logger.info("%s -> %s", q, answer(model, tok, q))
    logger.info("finished in %.1fs", time.time() - t0)


if __name__ == "__main__":
    main()
