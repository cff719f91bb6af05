"""DPO on pairwise preferences collected from our annotation tool.

Each row has a prompt, the answer annotators preferred and the one they rejected. The policy is
a small Llama built from a config; the reference model is a frozen copy.
"""
import argparse
import copy

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, TrainingArguments
from trl import DPOTrainer

PREFS = [
    ("summarise the meeting", "we agreed to ship on friday", "meeting"),
    ("reply to the customer", "thanks we have fixed the bug", "no"),
    ("name a colour", "blue", "the the the"),
    ("translate hello to french", "bonjour", "hello"),
    ("give a short greeting", "good morning", "morning morning morning"),
    ("what is two plus two", "four", "five"),
]


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--output_dir", default="dpo-prefs")
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=5e-6)
    p.add_argument("--max_steps", type=int, default=2)
    return p.parse_args()


def make_tokenizer():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3}
    for row in PREFS:
        for w in " ".join(row).split():
            vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="<pad>")


def main():
    args = get_args()
    tokenizer = make_tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         bos_token_id=1, eos_token_id=2, pad_token_id=3)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    ref_model = copy.deepcopy(model)
    dataset = Dataset.from_dict({"prompt": [p for p, _, _ in PREFS] * 2,
                                 "chosen": [c for _, c, _ in PREFS] * 2,
                                 "rejected": [r for _, _, r in PREFS] * 2})

    training_args = TrainingArguments(
        output_dir=args.output_dir,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=1,
        learning_rate=args.lr,
        max_steps=args.max_steps,
        logging_steps=1,
        remove_unused_columns=False,
        report_to="none",
    )
    trainer = DPOTrainer(
        model,
        ref_model,
        args=training_args,
        train_dataset=dataset,
        tokenizer=tokenizer,
    )
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
