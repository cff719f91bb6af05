"""Score support tickets with the urgency classifier that the training box exported.

The training box (a newer transformers) writes the checkpoint folder: config.json, the weights,
tokenizer.json and tokenizer_config.json. This job, on the serving image, loads the folder with the
Auto classes and scores a batch of tickets. To keep the run self-contained the export step is done
here too: a tiny BERT built from a config, and a word-level tokenizer whose tokenizer_config.json is
written the way the training box writes it.
"""
import argparse
import json
import logging
import os
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertForSequenceClassification

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("ticket-scorer")

LABELS = ["low", "normal", "urgent"]
TICKETS = [
    "printer on floor two is jammed again",
    "cannot log in to the payroll portal since this morning",
    "production database is down and customers see errors",
    "please add me to the design mailing list",
    "laptop battery drains fast",
    "the whole office lost network access",
]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]


def build_word_tokenizer(texts):
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for text in texts:
        for word in text.lower().split():
            vocab.setdefault(word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return tok, vocab


def export_checkpoint(folder, texts):
    """What the training box leaves behind after fine-tuning (its transformers writes these files)."""
    tok, vocab = build_word_tokenizer(texts)
    tok.save(os.path.join(folder, "tokenizer.json"))
    tokenizer_config = {
        "backend": "tokenizers",
        "cls_token": "[CLS]",
        "model_max_length": 64,
        "pad_token": "[PAD]",
        "sep_token": "[SEP]",
        "tokenizer_class": "TokenizersBackend",
        "unk_token": "[UNK]",
    }
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config, f, indent=2)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=len(LABELS),
                        id2label=dict(enumerate(LABELS)), label2id={l: i for i, l in enumerate(LABELS)})
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    log.info("exported checkpoint to %s: %s", folder, sorted(os.listdir(folder)))


def load_scorer(folder):
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    model.eval()
    return tokenizer, model


def score(tokenizer, model, texts, batch_size):
    rows = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start:start + batch_size]
        enc = tokenizer(chunk, padding=True, truncation=True, max_length=32, return_tensors="pt")
        with torch.no_grad():
            probs = model(**enc).logits.softmax(-1)
        for text, p in zip(chunk, probs):
            rows.append((text, model.config.id2label[int(p.argmax())], float(p.max())))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", default=None, help="exported folder; made here when omitted")
    ap.add_argument("--batch_size", type=int, default=4)
    ap.add_argument("--threshold", type=float, default=0.4)
    args = ap.parse_args()

    folder = args.checkpoint
    if folder is None:
        folder = tempfile.mkdtemp(prefix="ticket-urgency-")
        export_checkpoint(folder, TICKETS)
    tokenizer, model = load_scorer(folder)
    results = score(tokenizer, model, TICKETS, args.batch_size)
    flagged = [r for r in results if r[1] == "urgent" and r[2] >= args.threshold]
    for text, label, conf in results:
        log.info("%-8s %.2f  %s", label, conf, text)
    log.info("%d of %d tickets flagged urgent", len(flagged), len(results))


if __name__ == "__main__":
    main()
