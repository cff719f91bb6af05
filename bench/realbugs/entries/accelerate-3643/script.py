"""Score a stream of support tickets with a small classifier, one shard per worker.

Our batch scheduler starts N copies of this script (not through `accelerate launch`) and passes
each its rank; every worker takes its share of the ticket stream with accelerate's
`prepare_data_loader` and writes its predictions to its own file. The stream is a streaming
`datasets` dataset split into several shards. A tiny BERT built from a config and tickets written
in code stand in for the real model and queue.
"""
import argparse
import json
import os

import torch
from accelerate.data_loader import prepare_data_loader
from datasets import Dataset
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from torch.utils.data import DataLoader
from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

TICKETS = [
    "my invoice shows the wrong amount",
    "the app crashes when i open settings",
    "please refund my last payment",
    "i cannot log in after the update",
    "the export button does nothing",
    "charge appeared twice on my card",
    "screen stays black on start",
    "how do i change my billing address",
]
LABELS = ["billing", "bug"]


def parse_args():
    ap = argparse.ArgumentParser(description="score one shard of the ticket stream")
    ap.add_argument("--world_size", type=int, default=int(os.environ.get("WORKERS", 2)))
    ap.add_argument("--rank", type=int, default=int(os.environ.get("WORKER_RANK", 0)))
    ap.add_argument("--num_shards", type=int, default=4)
    ap.add_argument("--batch_size", type=int, default=2)
    ap.add_argument("--max_length", type=int, default=16)
    ap.add_argument("--out_dir", default="ticket-scores")
    return ap.parse_args()


def build_tokenizer():
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for text in TICKETS:
        for word in text.split():
            vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def build_model(vocab_size):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=len(LABELS))
    return BertForSequenceClassification(config).eval()


def ticket_stream(num_shards):
    rows = {"ticket_id": list(range(len(TICKETS))), "text": TICKETS}
    return Dataset.from_dict(rows).to_iterable_dataset(num_shards=num_shards)


def make_collate(tokenizer, max_length):
    def collate(rows):
        enc = tokenizer([r["text"] for r in rows], padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")
        enc["ticket_id"] = torch.tensor([r["ticket_id"] for r in rows])
        return enc
    return collate


def score(model, loader):
    results = []
    with torch.no_grad():
        for batch in loader:
            ids = batch.pop("ticket_id")
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            for tid, pred in zip(ids.tolist(), logits.argmax(-1).tolist()):
                results.append({"ticket_id": tid, "label": LABELS[pred]})
    return results


def main():
    args = parse_args()
    tokenizer = build_tokenizer()
    model = build_model(len(tokenizer))
    stream = ticket_stream(args.num_shards)
    print(f"worker {args.rank}/{args.world_size}: stream split into {args.num_shards} shards")

    loader = DataLoader(stream, batch_size=args.batch_size, collate_fn=make_collate(tokenizer, args.max_length))
    loader = prepare_data_loader(loader, num_processes=args.world_size, process_index=args.rank)

    results = score(model, loader)
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, f"scores-{args.rank}.json")
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"worker {args.rank}: scored {len(results)} tickets -> {path}")


if __name__ == "__main__":
    main()
