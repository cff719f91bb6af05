"""Serve two LoRA fine-tunes of one small Qwen2 chat model side by side.

Each adapter is trained on its own little task (order status answers, return policy answers) with
the target modules written as one regular expression, the way fine-tuning front ends write them
when they keep a vision tower or the head out of the adapter. For serving, the first adapter is
attached with get_peft_model and the second is loaded next to it from its folder, so requests can
switch between them. A tiny Qwen2 built from a config stands in for the checkpoint.
"""
import argparse
import os
import tempfile

import torch
from peft import LoraConfig, TaskType, get_peft_model, load_peft_weights, set_peft_model_state_dict
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

TASKS = {
    "orders": [
        ("where is order 1042", "order 1042 left the warehouse today"),
        ("has my order shipped", "your order ships within two days"),
        ("can i cancel my order", "orders can be cancelled before they ship"),
    ],
    "returns": [
        ("how do i return shoes", "print the label and drop the box off"),
        ("when is my refund paid", "refunds are paid within five days"),
        ("can i return a gift", "gifts can be returned for store credit"),
    ],
}
# everything linear in the decoder, nothing in a (future) vision tower, not the head
TARGET_REGEX = r"^(?!.*visual).*(?:q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj).*"
MODEL = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}


def parse_args():
    ap = argparse.ArgumentParser(description="train two LoRA adapters, then serve both")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=int, default=16)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--outdir", default=None)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<unk>": 0, "<pad>": 1, "<eos>": 2, "Q:": 3, "A:": 4}
    for pairs in TASKS.values():
        for question, answer in pairs:
            for word in f"{question} {answer}".split():
                vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="<eos>", model_input_names=["input_ids", "attention_mask"])


def load_base(tokenizer, seed):
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True, **MODEL)
    return Qwen2ForCausalLM(config)


def lora_config(args):
    return LoraConfig(task_type=TaskType.CAUSAL_LM, r=args.rank, lora_alpha=args.alpha,
                      lora_dropout=0.05, target_modules=TARGET_REGEX)


def batch_for(tokenizer, pairs):
    enc = tokenizer([f"Q: {q} A: {a} <eos>" for q, a in pairs], padding=True, return_tensors="pt")
    labels = enc["input_ids"].clone()
    labels[enc["attention_mask"] == 0] = -100
    enc["labels"] = labels
    return enc


def train_adapter(tokenizer, args, task, outdir):
    model = get_peft_model(load_base(tokenizer, args.seed), lora_config(args))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    batch = batch_for(tokenizer, TASKS[task])
    model.train()
    for step in range(args.steps):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    print(f"[{task}] final loss {loss.item():.3f}")
    path = os.path.join(outdir, task)
    model.save_pretrained(path)
    return path


def serve(tokenizer, args, paths):
    """Attach the first adapter, load the second beside it, and answer with each."""
    first, second = sorted(paths)
    config_first = LoraConfig.from_pretrained(paths[first])
    model = get_peft_model(load_base(tokenizer, args.seed), config_first, adapter_name=first)
    model.load_adapter(paths[second], adapter_name=second)
    # the first adapter was attached from its config only: put its trained weights back
    set_peft_model_state_dict(model, load_peft_weights(paths[first]), adapter_name=first)
    model.eval()
    for task in (first, second):
        model.set_adapter(task)
        question = TASKS[task][0][0]
        enc = tokenizer(f"Q: {question} A:", return_tensors="pt")
        with torch.no_grad():
            ids = model.generate(**enc, max_new_tokens=6, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        print(f"[{task}] {tokenizer.decode(ids[0], skip_special_tokens=True)}")


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    outdir = args.outdir or tempfile.mkdtemp(prefix="lora-adapters-")
    paths = {task: train_adapter(tokenizer, args, task, outdir) for task in TASKS}
    serve(tokenizer, args, paths)


if __name__ == "__main__":
    main()
