"""Train a summariser through a thin wrapper around a seq2seq model.

The wrapper is where our routing logic lives (it decides per batch whether to add a task
prefix); here it only forwards to the wrapped model. A tiny T5 built from a config and a few
article/summary pairs written in code stand in for the real checkpoint and corpus.
"""
import argparse

import torch
import torch.nn as nn
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (DataCollatorForSeq2Seq, PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration,
                          Trainer, TrainingArguments)

ARTICLES = [
    ("the city council voted to build a new park near the river", "council approves river park"),
    ("heavy rain caused flooding in the north of the country", "rain floods the north"),
    ("the local team won the final after extra time", "local team wins final"),
    ("scientists found water ice on the surface of the moon", "ice found on the moon"),
    ("the museum will open a new wing for modern art", "museum adds modern art wing"),
    ("a new bridge will connect the two sides of the town", "new bridge connects town"),
]


class RoutedModel(nn.Module):
    """Wraps a pretrained seq2seq model; forward/generate pass everything through."""

    def __init__(self, base_model, prefix_ids=None):
        super().__init__()
        self.base_model = base_model
        self.config = base_model.config
        self.prefix_ids = prefix_ids

    def forward(self, *args, **kwargs):
        return self.base_model(*args, **kwargs)

    def generate(self, *args, **kwargs):
        return self.base_model.generate(*args, **kwargs)

    def prepare_inputs_for_generation(self, *args, **kwargs):
        return self.base_model.prepare_inputs_for_generation(*args, **kwargs)

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output_dir", default="routed-summariser")
    ap.add_argument("--max_source_length", type=int, default=24)
    ap.add_argument("--max_target_length", type=int, default=8)
    ap.add_argument("--batch_size", type=int, default=2)
    ap.add_argument("--max_steps", type=int, default=3)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for article, summary in ARTICLES:
        for word in f"{article} {summary}".split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="</s>", pad_token="<pad>",
                                   model_input_names=["input_ids", "attention_mask"])


def preprocess(tokenizer, pairs, args):
    """One dict of token ids per example, the shape DataCollatorForSeq2Seq pads."""
    features = []
    for content, summary in pairs:
        model_inputs = tokenizer(content, max_length=args.max_source_length, truncation=True)
        labels = tokenizer(text_target=summary, max_length=args.max_target_length, truncation=True)
        features.append({**model_inputs, "labels": labels["input_ids"]})
    return features


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    base = T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                               num_decoder_layers=2, num_heads=4, pad_token_id=0, eos_token_id=1,
                                               decoder_start_token_id=0))
    model = RoutedModel(base)
    print(f"wrapped model with {model.num_parameters()} parameters")

    tokenized_dataset = preprocess(tokenizer, ARTICLES * 3, args)
    print(f"Keys of tokenized dataset: {list(tokenized_dataset[0])}")

    data_collator = DataCollatorForSeq2Seq(tokenizer, model=base, label_pad_token_id=-100, pad_to_multiple_of=8)
    training_args = TrainingArguments(
        output_dir=args.output_dir,
        per_device_train_batch_size=args.batch_size,
        learning_rate=1e-3,
        max_steps=args.max_steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
    )
    trainer = Trainer(model=model, args=training_args, data_collator=data_collator, train_dataset=tokenized_dataset)
    trainer.train()

    sample = tokenizer(ARTICLES[0][0], return_tensors="pt")
    out = model.generate(**sample, max_new_tokens=args.max_target_length)
    print(tokenizer.decode(out[0], skip_special_tokens=True))


if __name__ == "__main__":
    main()
