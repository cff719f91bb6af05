# %% [markdown]
# # Ticket triage: fine-tune a small DistilBERT to route support tickets
#
# Exported from the team notebook (jupytext percent format). The notebook shows the Trainer's
# HTML progress table; when the same file runs as a script the callback is added explicitly so the
# run logs the same table. `eval_on_start` gives a baseline score before any training step.
# A tiny DistilBERT built from a config stands in for `distilbert-base-uncased`; tickets are
# written in code.

# %%
import argparse
import random

import numpy as np
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import (DataCollatorWithPadding, DistilBertConfig, DistilBertForSequenceClassification,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments)
from transformers.utils.notebook import NotebookProgressCallback

ROUTES = ["billing", "login", "shipping"]
TEMPLATES = {
    "billing": ["i was charged twice this month", "please refund my last invoice", "my card payment failed"],
    "login": ["i cannot log in to my account", "password reset link does not work", "two factor code never arrives"],
    "shipping": ["my parcel has not arrived yet", "the tracking number is wrong", "package arrived damaged"],
}


# %%
def parse_args():
    ap = argparse.ArgumentParser(description="support ticket routing")
    ap.add_argument("--tickets_per_route", type=int, default=8)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--eval_steps", type=int, default=3)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--output_dir", default="ticket-router")
    return ap.parse_args()


def make_tickets(rng, per_route):
    rows = []
    for label, route in enumerate(ROUTES):
        for _ in range(per_route):
            text = rng.choice(TEMPLATES[route])
            if rng.random() < 0.5:
                text = "hello , " + text + " , thanks"
            rows.append({"text": text, "labels": label})
    rng.shuffle(rows)
    return rows


def build_tokenizer():
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hello": 4, ",": 5, "thanks": 6}
    for texts in TEMPLATES.values():
        for text in texts:
            for word in text.split():
                vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]",
                                   model_input_names=["input_ids", "attention_mask"])


def compute_metrics(eval_pred):
    logits, labels = eval_pred
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


# %%
def main():
    args = parse_args()
    rng = random.Random(args.seed)
    tokenizer = build_tokenizer()
    rows = make_tickets(rng, args.tickets_per_route)
    encoded = [{**tokenizer(r["text"]), "labels": r["labels"]} for r in rows]
    cut = int(0.75 * len(encoded))
    train_ds, eval_ds = encoded[:cut], encoded[cut:]

    config = DistilBertConfig(vocab_size=len(tokenizer), dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                              max_position_embeddings=64, num_labels=len(ROUTES), pad_token_id=tokenizer.pad_token_id,
                              id2label=dict(enumerate(ROUTES)), label2id={r: i for i, r in enumerate(ROUTES)})
    model = DistilBertForSequenceClassification(config)
    training_args = TrainingArguments(output_dir=args.output_dir, eval_strategy="steps", eval_steps=args.eval_steps,
                                      eval_on_start=True, save_strategy="no", num_train_epochs=args.epochs,
                                      per_device_train_batch_size=args.batch_size,
                                      per_device_eval_batch_size=args.batch_size, learning_rate=5e-4,
                                      logging_steps=1, report_to=[], seed=args.seed)
    trainer = Trainer(model=model, args=training_args, train_dataset=train_ds, eval_dataset=eval_ds,
                      tokenizer=tokenizer, data_collator=DataCollatorWithPadding(tokenizer),
                      compute_metrics=compute_metrics, callbacks=[NotebookProgressCallback])
    trainer.train()
    print(trainer.evaluate())


# %%
if __name__ == "__main__":
    main()
