"""GRPO fine-tuning of a small chat model to write short, on-topic summaries.

Prompts are one-line "summarize this" requests over short posts generated in code; two reward
functions score each sampled completion: one prefers completions close to a target length, one
rewards reusing words of the post. Data loading uses worker processes so the tokenisation of
the next batch overlaps with generation. A tiny Qwen2 built from a config stands in for
Qwen2-0.5B-Instruct.
"""
import argparse
import logging
import random

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import GRPOConfig, GRPOTrainer

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("grpo-tldr")

SUBJECTS = ["my landlord", "our team lead", "the new neighbour", "my sister", "a coworker"]
ACTIONS = ["keeps borrowing", "forgot about", "complained about", "finally fixed", "broke"]
OBJECTS = ["the car", "the heater", "my laptop", "the shared fridge", "the printer"]
ENDINGS = ["what should i do ?", "am i wrong ?", "how do i bring it up ?", "is this normal ?"]


def parse_args():
    ap = argparse.ArgumentParser(description="GRPO on short post summaries")
    ap.add_argument("--n_posts", type=int, default=32)
    ap.add_argument("--target_len", type=int, default=20)
    ap.add_argument("--num_generations", type=int, default=4)
    ap.add_argument("--batch_size", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max_steps", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--output_dir", default="qwen2-grpo-tldr")
    return ap.parse_args()


def make_posts(rng, n):
    posts = []
    for _ in range(n):
        post = f"{rng.choice(SUBJECTS)} {rng.choice(ACTIONS)} {rng.choice(OBJECTS)} again . {rng.choice(ENDINGS)}"
        posts.append({"prompt": f"summarize : {post} summary :", "post": post})
    return posts


def build_tokenizer():
    vocab = {"<pad>": 0, "<unk>": 1, "<eos>": 2}
    for words in SUBJECTS + ACTIONS + OBJECTS + ENDINGS + ["summarize : again . summary :"]:
        for word in words.split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                  eos_token="<eos>", model_input_names=["input_ids", "attention_mask"])
    tok.padding_side = "left"
    return tok


def length_reward(target):
    def reward_len(completions, **kwargs):
        return [-abs(target - len(completion)) / target for completion in completions]
    return reward_len


def overlap_reward(completions, post, **kwargs):
    scores = []
    for completion, source in zip(completions, post):
        words = set(completion.split())
        scores.append(len(words & set(source.split())) / max(len(words), 1))
    return scores


def build_model(tokenizer):
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True)
    return Qwen2ForCausalLM(config)


def main():
    args = parse_args()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    tokenizer = build_tokenizer()
    dataset = Dataset.from_list(make_posts(rng, args.n_posts))
    log.info("dataset: %d prompts, e.g. %r", len(dataset), dataset[0]["prompt"])
    model = build_model(tokenizer)
    log.info("policy: %.2fM parameters", sum(p.numel() for p in model.parameters()) / 1e6)

    training_args = GRPOConfig(output_dir=args.output_dir, per_device_train_batch_size=args.batch_size,
                               num_generations=args.num_generations, max_prompt_length=32,
                               max_completion_length=8, learning_rate=args.lr, max_steps=args.max_steps,
                               logging_steps=1, save_strategy="no", report_to=[], bf16=False,
                               dataloader_num_workers=args.workers, seed=args.seed)
    trainer = GRPOTrainer(model=model, reward_funcs=[length_reward(args.target_len), overlap_reward],
                          args=training_args, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    history = [row for row in trainer.state.log_history if "reward" in row]
    for row in history:
        log.info("step %s reward %.3f", row.get("step"), row["reward"])


if __name__ == "__main__":
    main()
