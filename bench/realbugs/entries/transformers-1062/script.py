"""Fine-tune a GPT double-heads model to pick the right ending of a short story.

Each example is a four-sentence story and two candidate endings; the model scores every
"story + ending [CLS]" sequence with its multiple-choice head (read at the [CLS] position) and is
trained with the language-model loss beside it, as in the ROCStories setup. Here the vocabulary
files and a small model are built from our own stories and a config, so the run is offline.
"""
import argparse
import json
import os
import random
import tempfile

import torch
from pytorch_transformers import OpenAIGPTConfig, OpenAIGPTDoubleHeadsModel, OpenAIGPTTokenizer

STORIES = [
    ("tom forgot his umbrella at home. it started to rain on his walk. he ran to the bus stop. "
     "he waited there for the storm to pass.",
     "tom was soaked by the time he got to work.", "tom enjoyed a sunny picnic in the park."),
    ("anna planted tomatoes in may. she watered them every morning. by july the plants were tall. "
     "the first fruit turned red in august.",
     "anna made a salad with her own tomatoes.", "anna never grew anything in her life."),
    ("the team practised every night. they lost their first two games. the coach changed the plan. "
     "they won the next three games in a row.",
     "the team reached the final that season.", "the team had never played a single game."),
    ("sam wanted to learn to bake bread. he bought flour and yeast. his first loaf was flat. "
     "he read about kneading and tried again.",
     "his second loaf rose nicely in the oven.", "sam decided to build a boat instead."),
]


def parse_args():
    ap = argparse.ArgumentParser(description="story ending classifier")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=6.25e-5)
    ap.add_argument("--lm_coef", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--work_dir", default=None)
    return ap.parse_args()


def write_vocab_files(folder):
    """vocab.json and merges.txt for a character-level BPE over our stories."""
    symbols = sorted({ch for story, a, b in STORIES for ch in (story + a + b) if not ch.isspace()})
    vocab = {}
    for ch in symbols:
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    vocab.setdefault("<unk>", len(vocab))
    vocab_file, merges_file = os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        json.dump(vocab, f)
    with open(merges_file, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
    return vocab_file, merges_file


def build_model(vocab_size):
    # stands in for OpenAIGPTDoubleHeadsModel.from_pretrained('openai-gpt')
    config = OpenAIGPTConfig(vocab_size_or_config_json_file=vocab_size, n_positions=256, n_ctx=256,
                             n_embd=32, n_layer=2, n_head=4)
    return OpenAIGPTDoubleHeadsModel(config)


def encode_example(tokenizer, story, endings, max_len):
    """One row of input ids per candidate ending, padded; mc_token_ids point at each [CLS]."""
    rows = [tokenizer.encode(f"{story} {ending} [CLS]") for ending in endings]
    mc_token_ids = [len(r) - 1 for r in rows]
    rows = [r + [0] * (max_len - len(r)) for r in rows]
    lm_labels = [[t if i <= mc else -1 for i, t in enumerate(r)] for r, mc in zip(rows, mc_token_ids)]
    return rows, mc_token_ids, lm_labels


def build_batches(tokenizer, rng):
    examples = []
    for story, right, wrong in STORIES:
        endings, label = ([right, wrong], 0) if rng.random() < 0.5 else ([wrong, right], 1)
        examples.append((story, endings, label))
    max_len = max(len(tokenizer.encode(f"{s} {e} [CLS]")) for s, es, _ in examples for e in es)
    for story, endings, label in examples:
        rows, mc, lm = encode_example(tokenizer, story, endings, max_len)
        yield (torch.tensor([rows]), torch.tensor([mc]), torch.tensor([lm]), torch.tensor([label]))


def main():
    args = parse_args()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="rocstories-")

    vocab_file, merges_file = write_vocab_files(work_dir)
    tokenizer = OpenAIGPTTokenizer(vocab_file, merges_file)
    model = build_model(tokenizer.vocab_size)
    # the classification token the multiple-choice head reads
    tokenizer.add_special_tokens({"cls_token": "[CLS]"})
    print(f"vocabulary: {len(tokenizer)} tokens")

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    for epoch in range(args.epochs):
        total, correct = 0.0, 0
        for input_ids, mc_token_ids, lm_labels, mc_labels in build_batches(tokenizer, random.Random(epoch)):
            lm_loss, mc_loss, lm_logits, mc_logits = model(input_ids, mc_token_ids, lm_labels=lm_labels,
                                                           mc_labels=mc_labels)[:4]
            loss = args.lm_coef * lm_loss + mc_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            correct += int(mc_logits.argmax(-1).item() == mc_labels.item())
        print(f"epoch {epoch}: loss {total / len(STORIES):.3f}, accuracy {correct}/{len(STORIES)}")

    model.save_pretrained(work_dir)
    tokenizer.save_pretrained(work_dir)
    print(f"saved to {work_dir}")


if __name__ == "__main__":
    main()
