"""Extractive QA on our product FAQ: a tiny BERT span model, features built on the fly.

Tokenisation happens in the DataLoader workers (collate_fn), like the HF course's QA
preprocessing (question first, context truncated with a stride), so the main process only runs
the model. Workers use the spawn context because fork + tokenizers threads deadlocked on the
training box.

    python loader_qa_collate_workers.py --epochs 1 --workers 2
"""
import argparse
import logging
import time

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from torch.utils.data import DataLoader
from transformers import BertConfig, BertForQuestionAnswering, PreTrainedTokenizerFast

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("faq-qa")

BERT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 64, "max_position_embeddings": 64}

FAQ = [
    {"question": "how long is the warranty",
     "context": "every device comes with a two year warranty that covers manufacturing faults",
     "answer": "two year"},
    {"question": "can i pay by invoice",
     "context": "business customers can pay by invoice within thirty days of delivery",
     "answer": "within thirty days"},
    {"question": "do you ship abroad",
     "context": "we ship to all countries in the european union and to switzerland",
     "answer": "european union"},
    {"question": "where do i find my order number",
     "context": "your order number is printed on the confirmation email and on the invoice",
     "answer": "confirmation email"},
    {"question": "i bought the blue model last spring from a reseller and the hinge started to "
                 "squeak after a few months of daily use so is that covered and who do i contact",
     "context": "repairs under warranty are handled by the reseller that sold the device",
     "answer": "the reseller"},
    {"question": "how do i reset the device",
     "context": "hold the power button for ten seconds until the light turns white",
     "answer": "ten seconds"},
]


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=24)
    ap.add_argument("--stride", type=int, default=6)
    ap.add_argument("--lr", type=float, default=3e-4)
    return ap.parse_args()


def build_tokenizer(records):
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for r in records:
        for w in (r["question"] + " " + r["context"]).split():
            vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


class QACollator:
    """Turns raw FAQ records into model features (runs inside the loader workers)."""

    def __init__(self, tokenizer, max_length, stride):
        self.tok, self.max_length, self.stride = tokenizer, max_length, stride

    def __call__(self, records):
        enc = self.tok([r["question"] for r in records], [r["context"] for r in records],
                       truncation="only_second", max_length=self.max_length, stride=self.stride,
                       return_overflowing_tokens=True, return_offsets_mapping=True,
                       padding="max_length", return_tensors="pt")
        starts, ends = [], []
        for i, offsets in enumerate(enc.pop("offset_mapping").tolist()):
            rec = records[enc["overflow_to_sample_mapping"][i].item()]
            a0 = rec["context"].index(rec["answer"])
            a1 = a0 + len(rec["answer"])
            seq = enc.sequence_ids(i)
            start = end = 0  # CLS when the answer is not in this window
            for j, (o0, o1) in enumerate(offsets):
                if seq[j] != 1:
                    continue
                if o0 <= a0 < o1:
                    start = j
                if o0 < a1 <= o1:
                    end = j
            if end < start:
                start = end = 0
            starts.append(start)
            ends.append(end)
        enc.pop("overflow_to_sample_mapping")
        enc["start_positions"] = torch.tensor(starts)
        enc["end_positions"] = torch.tensor(ends)
        return dict(enc)


def main():
    args = parse_args()
    torch.manual_seed(0)
    tok = build_tokenizer(FAQ)
    model = BertForQuestionAnswering(BertConfig(vocab_size=len(tok), **BERT))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loader = DataLoader(FAQ, batch_size=args.batch_size, shuffle=False,
                        num_workers=args.workers, multiprocessing_context="spawn",
                        collate_fn=QACollator(tok, args.max_length, args.stride))
    log.info("%d records, vocab %d, %d workers", len(FAQ), len(tok), args.workers)

    for epoch in range(args.epochs):
        model.train()
        t0, total, n = time.time(), 0.0, 0
        for batch in loader:
            out = model(**batch)
            out.loss.backward()
            opt.step()
            opt.zero_grad()
            total += out.loss.item()
            n += 1
            log.info("epoch %d batch %d features %d loss %.4f", epoch, n,
                     batch["input_ids"].shape[0], out.loss.item())
        log.info("epoch %d mean loss %.4f in %.1fs", epoch, total / max(n, 1), time.time() - t0)

    model.eval()
    rec = FAQ[0]
    enc = tok(rec["question"], rec["context"], return_tensors="pt")
    with torch.no_grad():
        out = model(**enc)
    s, e = out.start_logits.argmax().item(), out.end_logits.argmax().item()
    print("Q:", rec["question"], "->", tok.decode(enc["input_ids"][0, s:e + 1]))


if __name__ == "__main__":
    main()
