"""Ingredient tagging for recipe lines: LoRA fine-tuning of a small BERT token classifier.

Each word of a recipe line gets one of the tags O, QTY (quantity), UNIT or ING (ingredient).
The encoder stays frozen and LoRA adapters are trained on the attention projections, as in the
T5 example we started from. A tiny BERT built from a config stands in for bert-base-cased; the
recipe lines are generated in code.
"""
import argparse
import logging
import random

import torch
from peft import LoraConfig, TaskType, get_peft_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import BertConfig, BertForTokenClassification, PreTrainedTokenizerFast

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("recipe-ner")

TAGS = ["O", "QTY", "UNIT", "ING"]
QUANTITIES = ["1", "2", "3", "half", "a"]
UNITS = ["cup", "cups", "tbsp", "tsp", "pinch", "grams"]
INGREDIENTS = ["flour", "sugar", "salt", "butter", "milk", "rice", "basil"]
FILLERS = ["add", "of", "mix", "in", "then", "with"]

CONFIG = {
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    # the attention projections, copied from the flan-t5 LoRA notebook
    "target_modules": ["q", "v"],
}


def parse_args():
    ap = argparse.ArgumentParser(description="LoRA token classification on recipe lines")
    ap.add_argument("--n_lines", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=7)
    return ap.parse_args()


def make_line(rng):
    words, tags = [], []
    for _ in range(rng.randint(1, 2)):
        if rng.random() < 0.5:
            words.append(rng.choice(FILLERS)); tags.append("O")
        words += [rng.choice(QUANTITIES), rng.choice(UNITS), rng.choice(INGREDIENTS)]
        tags += ["QTY", "UNIT", "ING"]
    return words, tags


def build_tokenizer():
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for word in QUANTITIES + UNITS + INGREDIENTS + FILLERS:
        vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def encode(tokenizer, lines, max_len=16):
    ids, labels = [], []
    for words, tags in lines:
        row = tokenizer.convert_tokens_to_ids(["[CLS]"] + words + ["[SEP]"])
        lab = [-100] + [TAGS.index(t) for t in tags] + [-100]
        pad = max_len - len(row)
        ids.append(row + [tokenizer.pad_token_id] * pad)
        labels.append(lab + [-100] * pad)
    ids = torch.tensor(ids)
    return ids, (ids != tokenizer.pad_token_id).long(), torch.tensor(labels)


def build_model(tokenizer):
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=len(TAGS),
                        id2label=dict(enumerate(TAGS)), label2id={t: i for i, t in enumerate(TAGS)})
    model = BertForTokenClassification(config)
    lora_config = LoraConfig(r=CONFIG["lora_r"], lora_alpha=CONFIG["lora_alpha"],
                             target_modules=CONFIG["target_modules"], lora_dropout=CONFIG["lora_dropout"],
                             bias="none", task_type=TaskType.TOKEN_CLS)
    model = get_peft_model(model, lora_config)
    model.print_trainable_parameters()
    return model


def train(model, data, args):
    ids, mask, labels = data
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    model.train()
    for epoch in range(args.epochs):
        total = 0.0
        for start in range(0, len(ids), args.batch_size):
            batch = slice(start, start + args.batch_size)
            out = model(input_ids=ids[batch], attention_mask=mask[batch], labels=labels[batch])
            out.loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            total += out.loss.item()
        log.info("epoch %d loss %.4f", epoch, total)


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    tokenizer = build_tokenizer()
    lines = [make_line(rng) for _ in range(args.n_lines)]
    log.info("example: %s", list(zip(*lines[0])))
    data = encode(tokenizer, lines)
    model = build_model(tokenizer)
    train(model, data, args)
    model.save_pretrained("recipe-ner-lora")


if __name__ == "__main__":
    main()
