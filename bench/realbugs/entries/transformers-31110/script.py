"""Short summaries of support-call transcripts with a small T5 and the Seq2SeqTrainer.

Every epoch the model generates summaries for the validation calls (`predict_with_generate`) and
they are scored with a unigram-overlap ROUGE-1 against the reference summaries. The summary
length is controlled with `max_new_tokens` on the model's generation config. A tiny T5 built
from a config stands in for `t5-small`; transcripts are generated in code.
"""
import argparse
import random

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (DataCollatorForSeq2Seq, PreTrainedTokenizerFast, Seq2SeqTrainer, Seq2SeqTrainingArguments,
                          T5Config, T5ForConditionalGeneration)

ISSUES = {
    "billing": ["charged twice", "refund pending", "invoice wrong"],
    "network": ["router offline", "slow connection", "dropped calls"],
    "device": ["screen cracked", "battery drains", "will not charge"],
}
FILLER = ["customer", "called", "about", "the", "and", "agent", "said", "today", "again", "please", "check"]


def parse_args():
    ap = argparse.ArgumentParser(description="call summarisation")
    ap.add_argument("--n_train", type=int, default=48)
    ap.add_argument("--n_eval", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--max_source_length", type=int, default=24)
    ap.add_argument("--max_target_length", type=int, default=24)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--output_dir", default="call-summariser")
    return ap.parse_args()


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build_tokenizer():
    words = sorted({w for phrases in ISSUES.values() for p in phrases for w in p.split()} | set(FILLER) | set(ISSUES))
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, "summarize:": 3}
    for word in words:
        vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                   model_input_names=["input_ids", "attention_mask"])


def make_calls(rng, n):
    calls = []
    for _ in range(n):
        topic = rng.choice(sorted(ISSUES))
        problem = rng.choice(ISSUES[topic])
        chatter = " ".join(rng.choice(FILLER) for _ in range(rng.randint(3, 9)))
        calls.append({"transcript": f"{chatter} {problem} {rng.choice(FILLER)}", "summary": f"{topic} {problem}"})
    return calls


def preprocess(calls, tokenizer, args):
    features = []
    for call in calls:
        source = tokenizer("summarize: " + call["transcript"] + " </s>", max_length=args.max_source_length,
                           truncation=True)
        target = tokenizer(call["summary"] + " </s>", max_length=args.max_target_length, truncation=True)
        features.append({**source, "labels": target["input_ids"]})
    return features


def make_compute_metrics(tokenizer):
    def compute_metrics(eval_pred):
        pred_ids, label_ids = eval_pred
        label_ids = np.where(label_ids != -100, label_ids, tokenizer.pad_token_id)
        predictions = tokenizer.batch_decode(pred_ids, skip_special_tokens=True)
        references = tokenizer.batch_decode(label_ids, skip_special_tokens=True)
        scores = []
        for pred, ref in zip(predictions, references):
            p, r = pred.split(), ref.split()
            overlap = sum(min(p.count(w), r.count(w)) for w in set(r))
            scores.append(0.0 if not overlap else 2 * overlap / (len(p) + len(r)))
        return {"rouge1": round(100 * float(np.mean(scores)), 2)}
    return compute_metrics


def main():
    args = parse_args()
    seed_everything(args.seed)
    rng = random.Random(args.seed)
    tokenizer = build_tokenizer()
    train_ds = preprocess(make_calls(rng, args.n_train), tokenizer, args)
    eval_ds = preprocess(make_calls(rng, args.n_eval), tokenizer, args)

    config = T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                      decoder_start_token_id=tokenizer.pad_token_id)
    model = T5ForConditionalGeneration(config)
    model.generation_config.max_new_tokens = args.max_target_length

    training_args = Seq2SeqTrainingArguments(
        output_dir=args.output_dir, eval_strategy="epoch", save_strategy="no", learning_rate=args.lr,
        per_device_train_batch_size=8, per_device_eval_batch_size=4, num_train_epochs=args.epochs,
        predict_with_generate=True, logging_steps=5, report_to=[], seed=args.seed)
    trainer = Seq2SeqTrainer(model=model, args=training_args, train_dataset=train_ds, eval_dataset=eval_ds,
                             tokenizer=tokenizer, data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
                             compute_metrics=make_compute_metrics(tokenizer))
    trainer.train()
    print(trainer.evaluate())


if __name__ == "__main__":
    main()
