"""GRPO with an evaluation pass before training, so the dashboard has a step-0 baseline.

Rewards favour longer completions (a smoke test of the pipeline before the real reward model).
The policy is a small Qwen2 built from a config; prompts are written in code.
"""
import argparse

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import GRPOConfig, GRPOTrainer

PROMPTS = ["the sun is", "my favourite food is", "on weekends i like to", "the best season is",
           "a good book should", "the city at night is", "coffee in the morning is", "the ocean looks"]
WORDS = ["warm", "bright", "pasta", "rice", "hike", "read", "summer", "winter", "calm", "loud", "and", "very"]


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loss_type", default="grpo")
    ap.add_argument("--num_generations", type=int, default=4)
    ap.add_argument("--grad_accum", type=int, default=4)
    ap.add_argument("--max_steps", type=int, default=2)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<unk>": 0, "<|endoftext|>": 1, "<|pad|>": 2}
    for w in WORDS + [w for p in PROMPTS for w in p.split()]:
        vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>",
                                  pad_token="<|pad|>", model_input_names=["input_ids", "attention_mask"])
    tok.padding_side = "left"
    return tok


def reward_len(completions, **kwargs):
    """Reward function that rewards longer completions."""
    return [float(len(c)) for c in completions]


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=64, eos_token_id=1, pad_token_id=2))
    train = Dataset.from_dict({"prompt": PROMPTS * 2})
    evaluation = Dataset.from_dict({"prompt": PROMPTS[:4]})

    training_args = GRPOConfig(output_dir="grpo-len", learning_rate=0.1, per_device_train_batch_size=1,
                               per_device_eval_batch_size=4, gradient_accumulation_steps=args.grad_accum,
                               num_generations=args.num_generations, max_completion_length=8,
                               max_steps=args.max_steps, report_to="none", eval_strategy="steps", eval_steps=1,
                               eval_on_start=True, loss_type=args.loss_type, bf16=False)
    trainer = GRPOTrainer(model=model, reward_funcs=reward_len, args=training_args, train_dataset=train,
                          eval_dataset=evaluation, processing_class=tokenizer)
    print(trainer.loss_type)
    trainer.train()


if __name__ == "__main__":
    main()
