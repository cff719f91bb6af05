"""Train a LoRA adapter for a small intent classifier, save it, and reload it for inference.

Part of a service that still pins an older transformers (our serving image is built against it);
PEFT is left unpinned in requirements so it floats to the newest release. The classifier is a
tiny Llama-style sequence classifier built from a config, and the utterances are generated in
code, so everything runs offline on a CPU.
"""
import argparse
import os
import random
import tempfile

import torch
from transformers import LlamaConfig, LlamaForSequenceClassification
from peft import LoraConfig, PeftModel, TaskType, get_peft_model

INTENTS = {
    "billing": ["my invoice is wrong", "i was charged twice", "refund my payment", "update my card"],
    "shipping": ["where is my parcel", "the box never arrived", "change my delivery address", "track my order"],
    "account": ["reset my password", "i cannot log in", "delete my profile", "change my email"],
}
FILLERS = ["please", "hello", "today", "asap", "thanks", "hi there"]

CFG = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "layers": 2,
    "heads": 4,
    "lora_r": 4,
    "lora_alpha": 8,
    "lr": 5e-3,
}


def build_vocab():
    words = {"<pad>": 0, "<unk>": 1}
    for phrases in INTENTS.values():
        for p in phrases:
            for w in p.split():
                words.setdefault(w, len(words))
    for f in FILLERS:
        for w in f.split():
            words.setdefault(w, len(words))
    return words


def encode(text, vocab, width=12):
    ids = [vocab.get(w, 1) for w in text.split()][:width]
    mask = [1] * len(ids) + [0] * (width - len(ids))
    return ids + [0] * (width - len(ids)), mask


def make_split(rng, n, vocab):
    labels = sorted(INTENTS)
    rows = []
    for _ in range(n):
        label = rng.randrange(len(labels))
        text = f"{rng.choice(FILLERS)} {rng.choice(INTENTS[labels[label]])}"
        rows.append((*encode(text, vocab), label))
    ids = torch.tensor([r[0] for r in rows])
    mask = torch.tensor([r[1] for r in rows])
    y = torch.tensor([r[2] for r in rows])
    return ids, mask, y


def build_model(vocab):
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=CFG["hidden_size"], intermediate_size=CFG["intermediate_size"],
                         num_hidden_layers=CFG["layers"], num_attention_heads=CFG["heads"],
                         max_position_embeddings=32, num_labels=len(INTENTS), pad_token_id=0)
    return LlamaForSequenceClassification(config)


def accuracy(model, ids, mask, y):
    model.eval()
    with torch.no_grad():
        pred = model(input_ids=ids, attention_mask=mask).logits.argmax(-1)
    return (pred == y).float().mean().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", type=int, default=96)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)

    vocab = build_vocab()
    train = make_split(rng, args.train, vocab)
    test = make_split(rng, 24, vocab)
    base = build_model(vocab)
    lora = LoraConfig(task_type=TaskType.SEQ_CLS, r=CFG["lora_r"], lora_alpha=CFG["lora_alpha"],
                      target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    model = get_peft_model(base, lora)
    model.print_trainable_parameters()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=CFG["lr"])

    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(train[2]))
        for start in range(0, len(order), args.batch):
            idx = order[start:start + args.batch]
            out = model(input_ids=train[0][idx], attention_mask=train[1][idx], labels=train[2][idx])
            out.loss.backward()
            opt.step()
            opt.zero_grad()
        print(f"epoch {epoch}: test acc {accuracy(model, *test):.2f}")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "intent-lora")
        model.save_pretrained(path)
        reloaded = PeftModel.from_pretrained(build_model(vocab), path)
        print("reloaded acc", round(accuracy(reloaded, *test), 2))


if __name__ == "__main__":
    main()
