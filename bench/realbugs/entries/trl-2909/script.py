"""GRPO fine-tuning of a tiny "unit converter" policy with rule-based rewards.

Same environment as the team's AWQ serving experiments (autoawq is installed there for the
quantised inference path). The policy is a tiny Qwen2 model built from a config; prompts and the
reference answers are generated in code; two reward functions score format and correctness.
"""
import argparse
import logging
import random
import re

from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, set_seed
from trl import GRPOConfig, GRPOTrainer

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("grpo-units")

UNITS = {"km": ("m", 1000), "kg": ("g", 1000), "m": ("cm", 100)}
WORDS = ["convert", "to", "answer", ":", "is", "."] + list(UNITS) + ["g", "cm"] + [str(i) for i in range(10)]
SPECIAL = ["<pad>", "<unk>", "<eos>"]


def parse_args():
    ap = argparse.ArgumentParser(description="GRPO on unit conversion prompts")
    ap.add_argument("--n_prompts", type=int, default=16)
    ap.add_argument("--num_generations", type=int, default=4)
    ap.add_argument("--max_steps", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--output_dir", default="grpo-units")
    return ap.parse_args()


def build_tokenizer():
    vocab = {tok: i for i, tok in enumerate(SPECIAL + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="<eos>", model_input_names=["input_ids", "attention_mask"])


def make_prompts(rng, n):
    rows = []
    for _ in range(n):
        unit = rng.choice(list(UNITS))
        value = rng.randint(1, 9)
        target, factor = UNITS[unit]
        rows.append({"prompt": f"convert {value} {unit} to {target} :", "answer": str(value * factor)})
    return rows


def format_reward(completions, **kwargs):
    return [1.0 if re.search(r"answer : [0-9 ]+", c) else 0.0 for c in completions]


def correctness_reward(completions, answer, **kwargs):
    rewards = []
    for completion, ref in zip(completions, answer):
        digits = "".join(re.findall(r"[0-9]", completion))
        rewards.append(2.0 if digits == ref else 0.0)
    return rewards


def main():
    args = parse_args()
    set_seed(args.seed)
    tokenizer = build_tokenizer()
    train = Dataset.from_list(make_prompts(random.Random(args.seed), args.n_prompts))
    log.info("prompts: %d, e.g. %s -> %s", len(train), train[0]["prompt"], train[0]["answer"])

    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    policy = Qwen2ForCausalLM(config)

    training_args = GRPOConfig(output_dir=args.output_dir, learning_rate=args.lr, max_steps=args.max_steps,
                               per_device_train_batch_size=args.num_generations,
                               num_generations=args.num_generations, max_prompt_length=16,
                               max_completion_length=8, logging_steps=1, save_strategy="no", report_to=[],
                               bf16=False, seed=args.seed)
    trainer = GRPOTrainer(model=policy, reward_funcs=[format_reward, correctness_reward], args=training_args,
                          train_dataset=train, processing_class=tokenizer)
    trainer.train()
    log.info("final log: %s", trainer.state.log_history[-1])


if __name__ == "__main__":
    main()
