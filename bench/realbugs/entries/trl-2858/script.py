"""GRPO on arithmetic word problems: reward completions that end with the right number.

Settings follow the R1-style recipes (8 generations per prompt); the batch settings are the
ones that fit one card. The policy is a small Qwen2 built from a config.
"""
import random
import re

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import GRPOConfig, GRPOTrainer

TRAIN = dict(num_generations=8, per_device_train_batch_size=1, gradient_accumulation_steps=8,
             learning_rate=1e-6, max_prompt_length=32, max_completion_length=8, max_steps=2)
NUMBERS = [str(i) for i in range(20)]


def make_problems(n, seed=0):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        rows.append({"prompt": f"what is {a} plus {b} ?", "answer": str(a + b)})
    return rows


def make_tokenizer():
    vocab = {"<unk>": 0, "<|endoftext|>": 1, "<|pad|>": 2}
    for w in ["what", "is", "plus", "?", "the", "answer"] + NUMBERS:
        vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>",
                                  pad_token="<|pad|>")
    tok.padding_side = "left"
    return tok


def correctness_reward(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        found = re.findall(r"\d+", completion)
        rewards.append(1.0 if found and found[-1] == truth else 0.0)
    return rewards


def brevity_reward(completions, **kwargs):
    return [-0.01 * len(c.split()) for c in completions]


def main():
    torch.manual_seed(0)
    tokenizer = make_tokenizer()
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=128, eos_token_id=1, pad_token_id=2))
    dataset = Dataset.from_list(make_problems(32))

    args = GRPOConfig(output_dir="grpo-arith", logging_steps=1, report_to="none", bf16=False, **TRAIN)
    trainer = GRPOTrainer(model=model, reward_funcs=[correctness_reward, brevity_reward], args=args,
                          train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    trainer.save_model("grpo-arith/final")


if __name__ == "__main__":
    main()
