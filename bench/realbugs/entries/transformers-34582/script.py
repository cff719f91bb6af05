"""Continued pre-training of a small causal LM on our domain text, with optional DeepSpeed.

The embedding resize after adding domain tokens has to gather the weights first under ZeRO-3,
so the script asks transformers whether ZeRO-3 is active.
"""
import argparse
import math

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (DataCollatorForLanguageModeling, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast,
                          Trainer, TrainingArguments)
from transformers.deepspeed import is_deepspeed_zero3_enabled

DOMAIN_TEXT = [
    "the pump pressure rose above the safe limit during the night shift",
    "valve seven was replaced after the inspection found corrosion",
    "the operator logged a pressure drop on line three",
    "maintenance scheduled the turbine overhaul for next week",
] * 8
DOMAIN_TOKENS = ["<valve>", "<pump>", "<turbine>"]


def build_tokenizer():
    vocab = {"<unk>": 0, "<pad>": 1, "<eos>": 2}
    for line in DOMAIN_TEXT:
        for w in line.split():
            vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="<eos>")


def resize_for_domain_tokens(model, tokenizer):
    added = tokenizer.add_tokens(DOMAIN_TOKENS)
    if added == 0:
        return
    if is_deepspeed_zero3_enabled():
        import deepspeed
        with deepspeed.zero.GatheredParameters(model.get_input_embeddings().weight, modifier_rank=0):
            model.resize_token_embeddings(len(tokenizer))
    else:
        model.resize_token_embeddings(len(tokenizer))


class TextDataset(torch.utils.data.Dataset):
    def __init__(self, tokenizer, lines, block=16):
        self.examples = [tokenizer(l, truncation=True, max_length=block)["input_ids"] for l in lines]

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return {"input_ids": self.examples[i]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--output_dir", default="cpt-out")
    p.add_argument("--deepspeed", default=None, help="DeepSpeed config JSON")
    p.add_argument("--max_steps", type=int, default=4)
    args = p.parse_args()

    tokenizer = build_tokenizer()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2,
                                       n_positions=64, pad_token_id=tokenizer.pad_token_id))
    resize_for_domain_tokens(model, tokenizer)

    targs = TrainingArguments(output_dir=args.output_dir, max_steps=args.max_steps,
                              per_device_train_batch_size=4, deepspeed=args.deepspeed, report_to=[])
    trainer = Trainer(model=model, args=targs, train_dataset=TextDataset(tokenizer, DOMAIN_TEXT),
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
    result = trainer.train()
    print("perplexity", math.exp(result.training_loss))


if __name__ == "__main__":
    main()
