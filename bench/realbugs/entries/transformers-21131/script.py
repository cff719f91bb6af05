"""Token classification (NER) on long clinical notes with a BERT encoder and the Trainer.

The notes are long, so the script raises max_seq_length above the usual 512 to avoid
truncating entities at the end of a note. A tiny BERT built from a config stands in for the
pretrained checkpoint (same 512 position embeddings); the notes and their BIO tags are
generated in code from a few templates.
"""
import argparse
import random

import numpy as np
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import (BertConfig, BertForTokenClassification, DataCollatorForTokenClassification,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments)

LABELS = ["O", "B-DRUG", "I-DRUG", "B-DOSE", "I-DOSE"]
DRUGS = [["aspirin"], ["metformin"], ["insulin", "glargine"], ["lisinopril"]]
DOSES = [["10", "mg"], ["500", "mg"], ["20", "units"], ["5", "mg"]]
FILLER = "patient seen today and reports feeling well with no new complaints since the last visit".split()


def parse_args():
    ap = argparse.ArgumentParser(description="NER on long notes")
    ap.add_argument("--max_seq_length", type=int, default=640)
    ap.add_argument("--num_notes", type=int, default=8)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--batch_size", type=int, default=2)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--output_dir", default="ner-long-notes")
    return ap.parse_args()


def make_note(rng, sentences):
    words, tags = [], []
    for _ in range(sentences):
        words += FILLER
        tags += ["O"] * len(FILLER)
        drug, dose = rng.choice(DRUGS), rng.choice(DOSES)
        words += ["started"] + drug + dose + ["daily"]
        tags += ["O"] + ["B-DRUG"] + ["I-DRUG"] * (len(drug) - 1) + ["B-DOSE"] + ["I-DOSE"] * (len(dose) - 1) + ["O"]
    return words, tags


def build_tokenizer():
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
    for group in [FILLER, ["started", "daily"]] + DRUGS + DOSES:
        for word in group:
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


def encode_notes(tokenizer, notes, max_length):
    """One feature dict per note: token ids, and word-level tags spread over the first sub-token."""
    label2id = {l: i for i, l in enumerate(LABELS)}
    features = []
    for words, tags in notes:
        enc = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length)
        previous, labels = None, []
        for word_id in enc.word_ids():
            labels.append(-100 if word_id is None or word_id == previous else label2id[tags[word_id]])
            previous = word_id
        features.append({**enc, "labels": labels})
    return features


def compute_metrics(eval_pred):
    logits, labels = eval_pred
    preds = np.argmax(logits, axis=-1)
    mask = labels != -100
    return {"token_accuracy": float((preds[mask] == labels[mask]).mean())}


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    notes = [make_note(rng, sentences=40) for _ in range(args.num_notes)]
    tokenizer = build_tokenizer()
    data = encode_notes(tokenizer, notes, args.max_seq_length)
    cut = int(len(data) * 0.75)
    train_data, eval_data = data[:cut], data[cut:]
    print("longest example:", max(len(x["input_ids"]) for x in data), "tokens")

    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, num_labels=len(LABELS),
                        id2label=dict(enumerate(LABELS)), label2id={l: i for i, l in enumerate(LABELS)})
    model = BertForTokenClassification(config)
    training_args = TrainingArguments(output_dir=args.output_dir, num_train_epochs=args.epochs,
                                      per_device_train_batch_size=args.batch_size,
                                      per_device_eval_batch_size=args.batch_size, learning_rate=5e-4,
                                      logging_steps=1, save_strategy="no", report_to=[], seed=args.seed)
    trainer = Trainer(model=model, args=training_args, train_dataset=train_data, eval_dataset=eval_data,
                      tokenizer=tokenizer, data_collator=DataCollatorForTokenClassification(tokenizer),
                      compute_metrics=compute_metrics)
    trainer.train()
    print(trainer.evaluate())


if __name__ == "__main__":
    main()
