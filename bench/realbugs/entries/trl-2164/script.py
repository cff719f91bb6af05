"""Reward-model training with LoRA, following the reward-modelling example script of the trl repository.

The preference data is in the conversational format of ultrafeedback_binarized (chosen and
rejected are message lists); a few pairs are written below. The reward model is a small Qwen2
sequence classifier built from a config, so the recipe can be smoke-tested before the real run.
"""
import argparse
from dataclasses import dataclass

import torch
from datasets import Dataset
from peft import LoraConfig
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForSequenceClassification
from trl import RewardConfig, RewardTrainer

PAIRS = [
    ("what is the capital of italy", "the capital of italy is rome", "italy is a country"),
    ("how many hours are in a day", "a day has twenty four hours", "days are long"),
    ("name a mammal that can fly", "the bat is a mammal that can fly", "birds can fly"),
    ("what colour is the sky on a clear day", "the sky is blue on a clear day", "the sky is big"),
    ("what is frozen water called", "frozen water is called ice", "water is wet"),
    ("how many sides does a triangle have", "a triangle has three sides", "triangles are shapes"),
]


@dataclass
class ScriptArguments:
    output_dir: str = "reward-lora"
    max_length: int = 64
    learning_rate: float = 1e-4
    per_device_train_batch_size: int = 2
    max_steps: int = 3
    lora_r: int = 8
    lora_alpha: int = 16
    use_peft: bool = True


def parse_args():
    ap = argparse.ArgumentParser(description="reward modelling")
    for name, default in vars(ScriptArguments()).items():
        kind = (lambda s: s.lower() in ("1", "true", "yes")) if isinstance(default, bool) else type(default)
        ap.add_argument(f"--{name}", type=kind, default=default)
    return ScriptArguments(**vars(ap.parse_args()))


def build_tokenizer():
    vocab = {"<unk>": 0, "<|endoftext|>": 1, "<|pad|>": 2, "user:": 3, "assistant:": 4}
    for question, good, bad in PAIRS:
        for word in f"{question} {good} {bad}".split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>",
                                        pad_token="<|pad|>", model_input_names=["input_ids", "attention_mask"])
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }} {% endfor %}"
    return tokenizer


def conversation(question, answer):
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def load_preferences():
    rows = {"chosen": [], "rejected": [], "score_chosen": [], "score_rejected": []}
    for question, good, bad in PAIRS * 3:
        rows["chosen"].append(conversation(question, good))
        rows["rejected"].append(conversation(question, bad))
        rows["score_chosen"].append(8.0)
        rows["score_rejected"].append(3.0)
    dataset = Dataset.from_dict(rows)
    return dataset.train_test_split(test_size=0.2, seed=0)


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    model = Qwen2ForSequenceClassification(Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, num_labels=1,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id))
    model.config.pad_token_id = tokenizer.pad_token_id

    dataset = load_preferences()
    training_args = RewardConfig(
        output_dir=args.output_dir,
        per_device_train_batch_size=args.per_device_train_batch_size,
        learning_rate=args.learning_rate,
        max_steps=args.max_steps,
        max_length=args.max_length,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="no",
        report_to="none",
        gradient_checkpointing=False,
    )
    peft_config = None
    if args.use_peft:
        peft_config = LoraConfig(task_type="SEQ_CLS", r=args.lora_r, lora_alpha=args.lora_alpha,
                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])

    trainer = RewardTrainer(
        model=model,
        tokenizer=tokenizer,
        args=training_args,
        train_dataset=dataset["train"],
        eval_dataset=dataset["test"],
        peft_config=peft_config,
    )
    trainer.train()
    metrics = trainer.evaluate()
    trainer.log_metrics("eval", metrics)
    trainer.save_model(training_args.output_dir)


if __name__ == "__main__":
    main()
