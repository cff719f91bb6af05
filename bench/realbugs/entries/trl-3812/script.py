"""P-tuning a small causal LM for product-title rewriting with SFTTrainer and a PEFT prompt
encoder (virtual tokens prepended to every input).

Titles and rewrites are written in code; the base model is a small Llama built from a config.
"""
import argparse

import torch
from datasets import Dataset
from peft import PromptEncoderConfig, TaskType
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import SFTConfig, SFTTrainer

PAIRS = [
    ("usb cable 2m black", "black usb cable two metres"),
    ("phone case red slim", "slim red phone case"),
    ("desk lamp led white", "white led desk lamp"),
    ("water bottle steel 1l", "steel water bottle one litre"),
    ("wireless mouse grey", "grey wireless mouse"),
    ("notebook a5 lined", "lined a5 notebook"),
]


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--num_virtual_tokens", type=int, default=8)
    ap.add_argument("--encoder_hidden_size", type=int, default=32)
    ap.add_argument("--max_steps", type=int, default=2)
    return ap.parse_args()


def build_tokenizer():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3, "title:": 4, "rewrite:": 5}
    for a, b in PAIRS:
        for w in (a + " " + b).split():
            vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>")


def to_text(rows):
    return {"text": [f"title: {a} rewrite: {b}" for a, b in zip(rows["title"], rows["rewrite"])]}


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=64, bos_token_id=1, eos_token_id=2,
                                         pad_token_id=3))
    data = Dataset.from_dict({"title": [a for a, _ in PAIRS] * 4, "rewrite": [b for _, b in PAIRS] * 4})
    data = data.map(to_text, batched=True, remove_columns=["title", "rewrite"])

    peft_config = PromptEncoderConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=args.num_virtual_tokens,
                                      encoder_hidden_size=args.encoder_hidden_size)
    sft_args = SFTConfig(output_dir="ptuning-titles", per_device_train_batch_size=4, max_steps=args.max_steps,
                         learning_rate=1e-3, logging_steps=1, report_to="none", max_length=32, bf16=False)
    trainer = SFTTrainer(model=model, args=sft_args, train_dataset=data, processing_class=tokenizer,
                         peft_config=peft_config)
    trainer.train()
    trainer.save_model("ptuning-titles/final")


if __name__ == "__main__":
    main()
