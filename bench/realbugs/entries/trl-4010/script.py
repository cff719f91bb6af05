"""RL fine-tuning of a small instruction model with GRPO on short-answer trivia, evaluating on a
held-out split before the first step so every run has a baseline point.

The reward is exact-match on the expected answer word; the model is a small Qwen2 built from a
config, and both splits are written in code.
"""
import random
import re

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import GRPOConfig, GRPOTrainer

QA = [("capital of france", "paris"), ("colour of the sky", "blue"), ("opposite of cold", "hot"),
      ("number after two", "three"), ("animal that barks", "dog"), ("season after winter", "spring")]
RUN = {"loss_type": "bnpo", "num_generations": 4, "per_device_train_batch_size": 4,
       "gradient_accumulation_steps": 2, "max_completion_length": 6, "max_steps": 2, "seed": 7}


def make_split(n, seed):
    rng = random.Random(seed)
    rows = [rng.choice(QA) for _ in range(n)]
    return Dataset.from_dict({"prompt": [f"question: {q} answer:" for q, _ in rows],
                              "answer": [a for _, a in rows]})


def build_tokenizer():
    vocab = {"<unk>": 0, "<|endoftext|>": 1, "<|pad|>": 2, "question:": 3, "answer:": 4}
    for q, a in QA:
        for w in (q + " " + a).split():
            vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>",
                                  pad_token="<|pad|>", model_input_names=["input_ids", "attention_mask"])
    tok.padding_side = "left"
    return tok


def exact_match(completions, answer, **kwargs):
    scores = []
    for completion, truth in zip(completions, answer):
        words = re.findall(r"[a-z]+", completion.lower())
        scores.append(1.0 if words[:1] == [truth] else 0.0)
    return scores


def main():
    torch.manual_seed(RUN["seed"])
    tokenizer = build_tokenizer()
    policy = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                          max_position_embeddings=64, eos_token_id=1, pad_token_id=2))
    config = GRPOConfig(output_dir="grpo-trivia", report_to="none", bf16=False, logging_steps=1,
                        eval_strategy="steps", eval_steps=1, eval_on_start=True, per_device_eval_batch_size=4,
                        **RUN)
    trainer = GRPOTrainer(model=policy, reward_funcs=exact_match, args=config, train_dataset=make_split(16, 0),
                          eval_dataset=make_split(4, 1), processing_class=tokenizer)
    trainer.train()
    print(trainer.evaluate())


if __name__ == "__main__":
    main()
