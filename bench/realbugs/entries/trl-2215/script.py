"""Distil a small "math tutor" chat model from a larger teacher with TRL's GKD trainer.

The teacher is a bigger checkpoint of the same family; the student is the small one we ship.
Conversations are generated in code (arithmetic questions with worked answers), the
tokenizer is built in code with a chat template, and both models are tiny Qwen2 models
built from configs so the run fits on a laptop CPU.
"""
import argparse
import logging
import random

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, set_seed
from trl import GKDConfig, GKDTrainer

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("distil")

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
WORDS = ["what", "is", "plus", "minus", "times", "the", "answer", "so", "we", "add", "take", "away",
         "multiply", "get", "please", "compute", "?", ".", ","] + [str(i) for i in range(21)]
SPECIAL = ["<pad>", "<unk>", "<|user|>", "<|assistant|>", "<|end|>"]

TEACHER = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4,
           "num_key_value_heads": 2, "vocab_size": 96}   # the big checkpoint pads its vocabulary
STUDENT = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
           "num_key_value_heads": 1, "vocab_size": 64}


def parse_args():
    ap = argparse.ArgumentParser(description="GKD distillation of a tiny math tutor")
    ap.add_argument("--n_train", type=int, default=32)
    ap.add_argument("--max_steps", type=int, default=6)
    ap.add_argument("--batch_size", type=int, default=4)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--lmbda", type=float, default=0.0, help="fraction of on-policy (student generated) batches")
    ap.add_argument("--beta", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--output_dir", default="gkd-math-tutor")
    return ap.parse_args()


def build_tokenizer():
    vocab = {tok: i for i, tok in enumerate(SPECIAL + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                  eos_token="<|end|>", model_input_names=["input_ids", "attention_mask"])
    tok.chat_template = CHAT_TEMPLATE
    return tok


def make_conversation(rng):
    a, b = rng.randint(0, 10), rng.randint(0, 10)
    op, word = rng.choice([("+", "plus"), ("*", "times")])
    result = a + b if op == "+" else a * b
    if result > 20:
        op, word, result = "+", "plus", a + b
    question = f"what is {a} {word} {b} ?"
    verb = "add" if op == "+" else "multiply"
    answer = f"we {verb} {a} and {b} , so the answer is {result} ."
    return {"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]}


def build_model(cfg, tokenizer):
    config = Qwen2Config(max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True, **cfg)
    return Qwen2ForCausalLM(config)


def main():
    args = parse_args()
    set_seed(args.seed)
    rng = random.Random(args.seed)
    tokenizer = build_tokenizer()
    train = Dataset.from_list([make_conversation(rng) for _ in range(args.n_train)])
    log.info("train conversations: %d, e.g. %s", len(train), train[0]["messages"])

    teacher = build_model(TEACHER, tokenizer)
    student = build_model(STUDENT, tokenizer)
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    log.info("teacher %.1fk params, student %.1fk params", n(teacher) / 1e3, n(student) / 1e3)

    config = GKDConfig(output_dir=args.output_dir, per_device_train_batch_size=args.batch_size,
                       max_steps=args.max_steps, learning_rate=args.lr, lmbda=args.lmbda, beta=args.beta,
                       max_new_tokens=16, max_seq_length=64, logging_steps=1, save_strategy="no",
                       report_to=[], seed=args.seed)
    trainer = GKDTrainer(model=student, teacher_model=teacher, args=config, train_dataset=train,
                         tokenizer=tokenizer)
    trainer.train()

    student.eval()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "what is 3 plus 4 ?"}],
                                           tokenize=False, add_generation_prompt=True)
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = student.generate(**ids, max_new_tokens=12, do_sample=False)
    log.info("student says: %s", tokenizer.decode(out[0][ids["input_ids"].shape[1]:]))


if __name__ == "__main__":
    main()
