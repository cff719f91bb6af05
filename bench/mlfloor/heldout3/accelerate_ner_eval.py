"""Train + evaluate a tiny slot tagger (BIO tags) for the booking assistant with Accelerate.

Eval follows the run_ner_no_trainer recipe: pad predictions and labels across processes on the
sequence dim, gather, then score on the main process.

    accelerate launch --multi_gpu --num_processes 2 accelerate_ner_eval.py --epochs 1
"""
import argparse
import logging

import torch
from accelerate import Accelerator
from accelerate.logging import get_logger
from accelerate.utils import set_seed
from tokenizers import Tokenizer, models, pre_tokenizers
from torch.utils.data import DataLoader
from transformers import AutoModelForTokenClassification, DistilBertConfig, PreTrainedTokenizerFast

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s | %(message)s")
logger = get_logger(__name__)

TAGS = ["O", "B-CITY", "B-DATE", "I-DATE", "B-PEOPLE"]
HPARAMS = {"lr": 3e-4, "train_bs": 4, "eval_bs": 4, "grad_accum": 1, "dim": 32, "layers": 2}

TRAIN = [
    ("book a table in paris for two", "O O O O B-CITY O B-PEOPLE"),
    ("flight to rome on may third", "O O B-CITY O B-DATE I-DATE"),
    ("hotel in berlin for four people", "O O B-CITY O B-PEOPLE O"),
    ("train to madrid next friday", "O O B-CITY B-DATE I-DATE"),
    ("dinner for three in lisbon", "O O B-PEOPLE O B-CITY"),
    ("room in vienna on june first", "O O B-CITY O B-DATE I-DATE"),
    ("taxi to oslo tomorrow", "O O B-CITY B-DATE"),
    ("book paris for five on monday", "O B-CITY O B-PEOPLE O B-DATE"),
]
EVAL = [
    {"text": "table in rome for two", "tags": "O O B-CITY O B-PEOPLE"},
    {"text": "flight to berlin next monday", "tags": "O O B-CITY B-DATE I-DATE"},
    {"text": "hotel in oslo for three", "tags": "O O B-CITY O B-PEOPLE"},
    {"text": "train to vienna tomorrow", "tags": "O O B-CITY B-DATE"},
    {"text": "dinner in madrid on may first", "tags": "O O B-CITY O B-DATE I-DATE"},
    {"text": "room for four in lisbon", "tags": None},  # still in the annotation queue
    {"text": "taxi to paris on friday", "tags": "O O B-CITY O B-DATE"},
    {"text": "book rome for two people", "tags": "O B-CITY O B-PEOPLE O"},
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--max-length", type=int, default=16)
    return p.parse_args()


def build_tokenizer():
    words = sorted({w for t, _ in TRAIN for w in t.split()} | {w for e in EVAL for w in e["text"].split()})
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]"] + words)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]")


def to_features(text, tags, tokenizer, max_length):
    feat = {"input_ids": tokenizer(text, truncation=True, max_length=max_length)["input_ids"]}
    if tags is not None:  # one word-level token per word, so tags line up 1:1
        feat["labels"] = [TAGS.index(t) for t in tags.split()][:max_length]
    return feat


def make_collator(pad_id):
    def collate(features):
        width = max(len(f["input_ids"]) for f in features)
        ids = [f["input_ids"] + [pad_id] * (width - len(f["input_ids"])) for f in features]
        batch = {"input_ids": torch.tensor(ids), "attention_mask": (torch.tensor(ids) != pad_id).long()}
        if all("labels" in f for f in features):
            batch["labels"] = torch.tensor([f["labels"] + [-100] * (width - len(f["labels"])) for f in features])
        return batch
    return collate


def main():
    args = parse_args()
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=HPARAMS["grad_accum"])
    set_seed(args.seed)
    logger.info(f"process {accelerator.process_index}/{accelerator.num_processes}", main_process_only=False)

    tokenizer = build_tokenizer()
    train_feats = [to_features(t, g, tokenizer, args.max_length) for t, g in TRAIN]
    eval_feats = [to_features(e["text"], e["tags"], tokenizer, args.max_length) for e in EVAL]
    collate = make_collator(tokenizer.pad_token_id)
    train_dl = DataLoader(train_feats, batch_size=HPARAMS["train_bs"], shuffle=True, collate_fn=collate)
    eval_dl = DataLoader(eval_feats, batch_size=HPARAMS["eval_bs"], collate_fn=collate)

    config = DistilBertConfig(vocab_size=len(tokenizer), dim=HPARAMS["dim"], n_layers=HPARAMS["layers"],
                              n_heads=2, hidden_dim=2 * HPARAMS["dim"], max_position_embeddings=32,
                              num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                              label2id={t: i for i, t in enumerate(TAGS)}, pad_token_id=tokenizer.pad_token_id)
    model = AutoModelForTokenClassification.from_config(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=HPARAMS["lr"])
    model, optimizer, train_dl, eval_dl = accelerator.prepare(model, optimizer, train_dl, eval_dl)

    for epoch in range(args.epochs):
        model.train()
        for batch in train_dl:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        logger.info(f"epoch {epoch} last loss {loss.item():.4f}")

        model.eval()
        correct = total = 0
        for batch in eval_dl:
            with torch.no_grad():
                outputs = model(**batch)
            predictions = outputs.logits.argmax(dim=-1)
            labels = batch.get("labels")
            predictions = accelerator.pad_across_processes(predictions, dim=1, pad_index=-100)
            labels = accelerator.pad_across_processes(labels, dim=1, pad_index=-100)
            preds_g, labels_g = accelerator.gather_for_metrics((predictions, labels))
            keep = labels_g != -100
            correct += (preds_g[keep] == labels_g[keep]).sum().item()
            total += keep.sum().item()
        accelerator.print(f"epoch {epoch}: token accuracy {correct / max(total, 1):.3f} over {total} tags")

    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).save_pretrained("slot_tagger")
        tokenizer.save_pretrained("slot_tagger")
    accelerator.end_training()


if __name__ == "__main__":
    main()
