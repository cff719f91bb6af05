"""Mixing two LoRA experts with X-LoRA on a small Llama for a toy support-desk router.

Two LoRA experts are trained first, one on billing questions and one on shipping questions; the
shipping expert only adapts the query and value projections, the billing one also the keys. X-LoRA
then loads both from their folders and learns a classifier that mixes them per token. A tiny Llama
built from a config stands in for the real checkpoint; the texts are written in code and tokenised
with a word-level vocabulary built from them.
"""
import argparse
import os
import tempfile

import torch
from peft import LoraConfig, TaskType, XLoraConfig, get_peft_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

BILLING = [
    "my invoice shows a double charge for march",
    "please refund the second charge on my card",
    "how do i download last year's invoices",
    "the plan price changed without notice",
]
SHIPPING = [
    "my parcel has not arrived after ten days",
    "the tracking number does not work",
    "can you ship to a different address",
    "the box arrived damaged and wet",
]
EXPERTS = {
    "billing": {"texts": BILLING, "target_modules": ["q_proj", "k_proj", "v_proj"]},
    "shipping": {"texts": SHIPPING, "target_modules": ["q_proj", "v_proj"]},
}
MODEL = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 64}


def parse_args():
    ap = argparse.ArgumentParser(description="train LoRA experts, then mix them with X-LoRA")
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--expert_steps", type=int, default=3)
    ap.add_argument("--mix_steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<unk>": 0, "<pad>": 1, "<eos>": 2}
    for text in BILLING + SHIPPING:
        for word in text.split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="<eos>", model_input_names=["input_ids", "attention_mask"])


def base_model(tokenizer, seed):
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, use_cache=False, **MODEL)
    return LlamaForCausalLM(config)


def encode(tokenizer, texts):
    enc = tokenizer([t + " <eos>" for t in texts], padding=True, return_tensors="pt")
    labels = enc["input_ids"].clone()
    labels[enc["attention_mask"] == 0] = -100
    enc["labels"] = labels
    return enc


def fit(model, batch, steps, lr, tag):
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    for step in range(steps):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"[{tag}] step {step}: loss {loss.item():.3f}")


def train_experts(tokenizer, args, workdir):
    paths = {}
    for index, (name, spec) in enumerate(EXPERTS.items()):
        model = base_model(tokenizer, args.seed)
        lora = LoraConfig(task_type=TaskType.CAUSAL_LM, r=args.rank, lora_alpha=2 * args.rank,
                          target_modules=spec["target_modules"], lora_dropout=0.0)
        model = get_peft_model(model, lora)
        fit(model, encode(tokenizer, spec["texts"]), args.expert_steps, args.lr, name)
        # X-LoRA names the experts it loads by position, so the mapping is keyed "0", "1", ...
        paths[str(index)] = os.path.join(workdir, name)
        model.save_pretrained(paths[str(index)])
    return paths


def train_mixer(tokenizer, args, paths):
    model = base_model(tokenizer, args.seed)
    config = XLoraConfig(task_type=TaskType.CAUSAL_LM, hidden_size=MODEL["hidden_size"],
                         adapters=paths, xlora_depth=1, enable_softmax=True)
    model = get_peft_model(model, config)
    model.print_trainable_parameters()
    fit(model, encode(tokenizer, BILLING + SHIPPING), args.mix_steps, args.lr, "xlora")
    return model


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    workdir = args.workdir or tempfile.mkdtemp(prefix="xlora-experts-")
    paths = train_experts(tokenizer, args, workdir)
    print("experts saved:", ", ".join(f"{k}={os.path.basename(v)}" for k, v in sorted(paths.items())))
    mixer = train_mixer(tokenizer, args, paths)
    mixer.eval()
    with torch.no_grad():
        loss = mixer(**encode(tokenizer, BILLING[:2] + SHIPPING[:2])).loss
    print(f"mixed loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
