"""Alpaca-style instruction tuning of a small OPT with trl's SFTTrainer.

Instruction / input / output records (a handful written in code, in the Alpaca layout) are turned
into prompts by a formatting function, with the "### Input:" block only when the record has one,
and the model is fine-tuned on the whole prompt. A tiny OPT built from a config stands in for
facebook/opt-350m; the tokenizer is a word-level one built from the records.
"""
import argparse
import logging
import tempfile

from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import OPTConfig, OPTForCausalLM, PreTrainedTokenizerFast, TrainingArguments
from trl import SFTTrainer

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("alpaca-sft")

RECORDS = [
    {"instruction": "Give three tips for staying healthy.", "input": "",
     "output": "Eat vegetables, sleep well and walk every day."},
    {"instruction": "Translate the sentence to French.", "input": "The cat sleeps.",
     "output": "Le chat dort."},
    {"instruction": "Classify the sentiment of the review.", "input": "I loved this film.",
     "output": "Positive."},
    {"instruction": "Name the capital of Italy.", "input": "",
     "output": "Rome is the capital of Italy."},
    {"instruction": "Summarise the text in one sentence.", "input": "The meeting moved to Monday because of the holiday.",
     "output": "The meeting is now on Monday."},
    {"instruction": "Write a haiku about rain.", "input": "",
     "output": "Soft rain on the roof, the garden drinks slowly, grey clouds hum along."},
]

PROMPT_WITH_INPUT = (
    "Below is an instruction that describes a task, paired with an input that provides further context. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n{output}"
)
PROMPT_NO_INPUT = (
    "Below is an instruction that describes a task. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Response:\n{output}"
)


def parse_args():
    ap = argparse.ArgumentParser(description="SFT a small OPT on Alpaca-style records")
    ap.add_argument("--output_dir", default=None, help="defaults to a fresh temporary folder")
    ap.add_argument("--max_seq_length", type=int, default=48)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--batch_size", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for record in RECORDS:
        for text in (PROMPT_WITH_INPUT.format(**record), PROMPT_NO_INPUT.format(**record)):
            for word in text.split():
                vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>",
                                   unk_token="<unk>", model_max_length=512)


def build_model(tokenizer):
    config = OPTConfig(vocab_size=len(tokenizer), hidden_size=32, ffn_dim=64, num_hidden_layers=2,
                       num_attention_heads=4, word_embed_proj_dim=32, max_position_embeddings=128,
                       pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    return OPTForCausalLM(config)


def formatting_prompts_func(example):
    """One Alpaca prompt per record; the input block only when the record has an input."""
    if len(example["input"]) >= 2:
        text = PROMPT_WITH_INPUT.format(instruction=example["instruction"], input=example["input"],
                                        output=example["output"])
    else:
        text = PROMPT_NO_INPUT.format(instruction=example["instruction"], output=example["output"])
    return text


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    dataset = Dataset.from_list(RECORDS)
    log.info("records: %d, vocabulary: %d", len(dataset), len(tokenizer))
    log.info("sample prompt:\n%s", formatting_prompts_func(dataset[1]))

    training_args = TrainingArguments(
        output_dir=args.output_dir or tempfile.mkdtemp(prefix="alpaca-sft-"),
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        learning_rate=args.lr,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=args.seed,
        no_cuda=True,
    )
    trainer = SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        tokenizer=tokenizer,
        formatting_func=formatting_prompts_func,
        max_seq_length=args.max_seq_length,
    )
    result = trainer.train()
    log.info("train loss %.3f", result.training_loss)


if __name__ == "__main__":
    main()
