"""Fine-tune a small causal LM on support-ticket replies with LoRA, then reload the adapter and
generate.

Notebook-style run: train the adapter for a few steps, save it, load it back the way the
serving notebook does (PeftConfig to find the base, then PeftModel on top) and print a couple of
generations. A tiny GPT-2 built from a config stands in for the pretrained checkpoint; the tickets
are generated in code.
"""
import argparse
import os
import random

# notebook settings carried over to the script: quiet tokenizers, plain tracebacks in the job log
for key, value in {"TOKENIZERS_PARALLELISM": "false", "ACCELERATE_DISABLE_RICH": "1"}.items():
    os.environ.setdefault(key, value)

import torch  # noqa: E402
from peft import LoraConfig, PeftConfig, PeftModel, get_peft_model  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast  # noqa: E402

PRODUCTS = ["router", "printer", "laptop", "headset", "monitor"]
PROBLEMS = ["does not turn on", "keeps disconnecting", "is very slow", "makes a noise"]
REPLIES = ["please restart the device", "please update the firmware", "we will send a replacement"]


def parse_args():
    ap = argparse.ArgumentParser(description="LoRA fine-tuning of a reply generator")
    ap.add_argument("--adapter_dir", default="ticket-reply-lora")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch_size", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--lora_r", type=int, default=8)
    ap.add_argument("--max_new_tokens", type=int, default=8)
    ap.add_argument("--seed", type=int, default=7)
    return ap.parse_args()


def make_tickets(rng, n):
    tickets = []
    for _ in range(n):
        product, problem, reply = rng.choice(PRODUCTS), rng.choice(PROBLEMS), rng.choice(REPLIES)
        tickets.append(f"ticket : my {product} {problem} reply : {reply}")
    return tickets


def build_tokenizer(texts):
    vocab = {"<pad>": 0, "<unk>": 1, "<eos>": 2}
    for text in texts:
        for word in text.split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="<eos>", padding_side="left",
                                   model_input_names=["input_ids", "attention_mask"])


def build_base_model(vocab_size, tokenizer, seed):
    # stands in for AutoModelForCausalLM.from_pretrained(...)
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab_size, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                        bos_token_id=tokenizer.eos_token_id)
    return GPT2LMHeadModel(config)


def batches(tokenizer, tickets, batch_size, rng):
    while True:
        chunk = rng.sample(tickets, batch_size)
        enc = tokenizer([t + " <eos>" for t in chunk], return_tensors="pt", padding=True)
        labels = enc["input_ids"].clone()
        labels[enc["attention_mask"] == 0] = -100
        yield {**enc, "labels": labels}


def train_adapter(model, tokenizer, tickets, args, rng):
    lora = LoraConfig(r=args.lora_r, lora_alpha=16, lora_dropout=0.05, target_modules=["c_attn"],
                      fan_in_fan_out=True, task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    model.print_trainable_parameters()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    model.train()
    for step, batch in zip(range(args.steps), batches(tokenizer, tickets, args.batch_size, rng)):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 4 == 0:
            print(f"step {step:3d}  loss {loss.item():.4f}")
    model.save_pretrained(args.adapter_dir)
    return model


def generate(model, tokenizer, prompts, max_new_tokens):
    batch = tokenizer(prompts, return_tensors="pt", padding=True)
    model.eval()
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id)
    return tokenizer.batch_decode(out, skip_special_tokens=True)


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    tickets = make_tickets(rng, 64)
    tokenizer = build_tokenizer(tickets + ["<eos>"])
    base = build_base_model(len(tokenizer), tokenizer, args.seed)
    train_adapter(base, tokenizer, tickets, args, rng)

    # the serving notebook: read the adapter config, rebuild the base, put the adapter on it
    config = PeftConfig.from_pretrained(args.adapter_dir)
    print(f"adapter {os.path.basename(args.adapter_dir)}: {config.peft_type}, task {config.task_type}")
    fresh = build_base_model(len(tokenizer), tokenizer, args.seed)
    model = PeftModel.from_pretrained(fresh, args.adapter_dir)
    prompts = ["ticket : my router keeps disconnecting reply :", "ticket : my laptop is very slow reply :"]
    for text in generate(model, tokenizer, prompts, args.max_new_tokens):
        print(text)


if __name__ == "__main__":
    main()
