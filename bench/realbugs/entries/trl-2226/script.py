"""DPO tutorial, adapted: train a small instruct model to prefer the chosen completion.

Follows the DPO trainer page of the trl documentation; the model and tokenizer are small ones
built in code and the preference pairs are written out here.
"""
import argparse

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import DPOConfig, DPOTrainer

PAIRS = [
    {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."},
    {"prompt": "Water boils at", "chosen": " one hundred degrees.", "rejected": " ten degrees."},
    {"prompt": "The capital of Italy is", "chosen": " Rome.", "rejected": " Paris."},
    {"prompt": "Cats are", "chosen": " mammals.", "rejected": " birds."},
]


def build_tokenizer():
    vocab = {"<unk>": 0, "<|endoftext|>": 1, "<|im_end|>": 2}
    for row in PAIRS:
        for text in row.values():
            for w in text.replace(".", " .").split():
                vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>")
    return tok


def build_model(tokenizer):
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config)


def parse_args():
    ap = argparse.ArgumentParser(description="DPO tutorial on a small model")
    ap.add_argument("--output_dir", default="Qwen2-small-DPO")
    ap.add_argument("--max_steps", type=int, default=2)
    ap.add_argument("--beta", type=float, default=0.1)
    return ap.parse_args()


def dpo_training():
    args = parse_args()
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    train_dataset = Dataset.from_list(PAIRS * 4)
    training_args = DPOConfig(output_dir=args.output_dir, logging_steps=1, max_steps=args.max_steps,
                              per_device_train_batch_size=2, beta=args.beta, report_to="none")
    trainer = DPOTrainer(model=model, args=training_args, processing_class=tokenizer, train_dataset=train_dataset)
    trainer.train()
    trainer.save_model(training_args.output_dir)


if __name__ == "__main__":
    dpo_training()
