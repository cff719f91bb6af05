"""Prompt-tune a small T5 to write titles for bug reports, then generate a title for a new report.

The model is a tiny T5 built from a config; the tokenizer is a word-level fast tokenizer built in
code and saved next to the run so that the prompt-tuning init text can be tokenized from it.
"""
import argparse
import os
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration
from peft import PromptTuningConfig, PromptTuningInit, TaskType, get_peft_model

REPORTS = [
    ("When I tried to open the window, a crash happen.", "Crash when opening window"),
    ("The save button does nothing after editing a file.", "Save button unresponsive"),
    ("Scrolling the list freezes the app for seconds.", "List scrolling freezes app"),
    ("Login fails with a blank error on the second try.", "Blank error on second login"),
]
INIT_TEXT = "Generate a title for the bug report:"


def build_tokenizer(out_dir):
    words = set()
    for report, title in REPORTS:
        words.update((report + " " + title + " " + INIT_TEXT + " Title :").replace(",", " ,").replace(".", " .").split())
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for w in sorted(words):
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(out_dir)
    return fast


def build_model(vocab_size):
    config = T5Config(vocab_size=vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=4, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    return T5ForConditionalGeneration(config)


def train(model, tokenizer, steps, lr):
    inputs = tokenizer([r + " Title :" for r, _ in REPORTS], return_tensors="pt", padding=True)
    labels = tokenizer([t for _, t in REPORTS], return_tensors="pt", padding=True).input_ids
    labels[labels == tokenizer.pad_token_id] = -100
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    for step in range(steps):
        loss = model(input_ids=inputs.input_ids, attention_mask=inputs.attention_mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    print(f"trained {steps} steps, loss {loss.item():.3f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-2)
    parser.add_argument("--tokenizer-dir", default=None)
    args = parser.parse_args()

    tok_dir = args.tokenizer_dir or os.path.join(tempfile.mkdtemp(), "t5-words")
    tokenizer = build_tokenizer(tok_dir)
    peft_config = PromptTuningConfig(
        task_type=TaskType.CAUSAL_LM,
        prompt_tuning_init=PromptTuningInit.TEXT,
        num_virtual_tokens=8,
        prompt_tuning_init_text=INIT_TEXT,
        tokenizer_name_or_path=tok_dir,
    )
    plm = get_peft_model(build_model(len(tokenizer)), peft_config)
    plm.print_trainable_parameters()
    train(plm, tokenizer, args.steps, args.lr)

    plm.eval()
    inputs = tokenizer("When I tried to open the window, a crash happen. Title :", return_tensors="pt")
    with torch.no_grad():
        outputs = plm.generate(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                               max_new_tokens=10, eos_token_id=1)
    print(tokenizer.batch_decode(outputs.detach().cpu().numpy(), skip_special_tokens=True))


if __name__ == "__main__":
    main()
