"""GRPO with a value head: we moved our PPO sentiment setup over to GRPO and kept the policy
wrapper we had (a causal LM with a value head), so we can compare value estimates later.

Reward: count of positive words in the completion. Small GPT-2 policy built from a config.
"""
import argparse
import random

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from trl import AutoModelForCausalLMWithValueHead, GRPOConfig, GRPOTrainer

POSITIVE = {"good", "great", "happy", "nice"}
PROMPTS = ["the movie was", "my day has been", "the food tasted", "this weather is"]
EXTRA = ["bad", "sad", "okay", "and", "very", "really"]


def tokenizer_for():
    vocab = {"<unk>": 0, "<|endoftext|>": 1}
    for w in sorted(POSITIVE) + EXTRA + [w for p in PROMPTS for w in p.split()]:
        vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>")
    tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def sentiment_reward(completions, **kwargs):
    return [float(sum(w in POSITIVE for w in c.split())) for c in completions]


def parse_args():
    ap = argparse.ArgumentParser(description="GRPO on a toy sentiment reward")
    ap.add_argument("--num_prompts", type=int, default=16)
    ap.add_argument("--num_generations", type=int, default=4)
    ap.add_argument("--max_steps", type=int, default=2)
    return ap.parse_args()


def main():
    cli = parse_args()
    random.seed(0)
    torch.manual_seed(0)
    tokenizer = tokenizer_for()
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                      bos_token_id=1, eos_token_id=1))
    policy = AutoModelForCausalLMWithValueHead(gpt2)

    dataset = Dataset.from_dict({"prompt": [random.choice(PROMPTS) for _ in range(cli.num_prompts)]})
    args = GRPOConfig(output_dir="grpo-sentiment", per_device_train_batch_size=4,
                      num_generations=cli.num_generations, max_prompt_length=16, max_completion_length=6,
                      max_steps=cli.max_steps, logging_steps=1, report_to="none")
    trainer = GRPOTrainer(model=policy, reward_funcs=sentiment_reward, args=args, train_dataset=dataset,
                          processing_class=tokenizer)
    trainer.train()
    print(trainer.state.log_history[-1])


if __name__ == "__main__":
    main()
