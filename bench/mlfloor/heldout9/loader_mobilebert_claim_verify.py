"""Claim verification for the product-spec checker (tiny MobileBERT, WordPiece tokenizer trained in code).

Each example is a customer claim about a product plus the spec sentences the retriever found for it;
the model reads (claim, evidence) pairs and says supported / refuted / not enough info. Batches are
built by a collator object in spawn DataLoader workers, as on the training box.

    python loader_mobilebert_claim_verify.py --epochs 2 --batch-size 4
"""
import argparse
import logging
import time

import torch
from torch.utils.data import DataLoader, Dataset
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import MobileBertConfig, MobileBertForSequenceClassification, PreTrainedTokenizerFast

log = logging.getLogger("claim-verify")

LABELS = ["supported", "refuted", "not_enough_info"]
MODEL = dict(hidden_size=32, embedding_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
             intra_bottleneck_size=16, true_hidden_size=16, num_feedforward_networks=1, max_position_embeddings=96)
LOADER = {"num_workers": 2, "multiprocessing_context": "spawn", "max_length": 48}
CLAIMS = [
    {"claim": "the kettle holds two litres", "evidence": ["capacity 1.7 litres", "stainless steel body"], "label": 1},
    {"claim": "the lamp has a dimmer", "evidence": ["touch dimmer with three levels"], "label": 0},
    {"claim": "the backpack is waterproof", "evidence": ["water resistant coating", "not fully waterproof"], "label": 1},
    {"claim": "the mouse works on bluetooth", "evidence": ["bluetooth 5.0 and usb receiver"], "label": 0},
    {"claim": "the chair comes assembled", "evidence": ["assembly required tools included"], "label": 1},
    {"claim": "the speaker lasts twelve hours", "evidence": ["battery life up to twelve hours"], "label": 0},
    {"claim": "the blender is dishwasher safe", "evidence": [], "label": 2},
    {"claim": "the jacket runs small", "evidence": ["regular fit true to size"], "label": 1},
    {"claim": "the tent sleeps four", "evidence": ["sleeps four adults", "two doors"], "label": 0},
    {"claim": "the pan works on induction", "evidence": ["suitable for gas electric and induction hobs"], "label": 0},
    {"claim": "the watch tracks sleep", "evidence": ["heart rate and step counting"], "label": 2},
    {"claim": "the drill has two batteries", "evidence": ["one 2.0 ah battery included"], "label": 1},
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=3)
    return p.parse_args()


def train_tokenizer(texts, vocab_size=200):
    tk = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    tk.train_from_iterator(texts, trainer=trainer)
    cls_id, sep_id = tk.token_to_id("[CLS]"), tk.token_to_id("[SEP]")
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]")


class ClaimDataset(Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


class ClaimCollator:
    """Pairs each claim with its retrieved evidence, joined into one passage."""

    def __init__(self, tokenizer, max_length):
        self.tokenizer = tokenizer
        self.max_length = max_length

    def __call__(self, batch):
        claims = [ex["claim"] for ex in batch]
        # the retriever sometimes finds nothing; an empty passage only adds [SEP] noise
        evidence = [" ; ".join(ex["evidence"]) for ex in batch if ex["evidence"]]
        enc = self.tokenizer(claims, evidence, truncation="only_second", max_length=self.max_length,
                             padding=True, return_tensors="pt")
        enc["labels"] = torch.tensor([ex["label"] for ex in batch])
        return dict(enc)


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in loader:
            pred = model(**batch).logits.argmax(-1)
            correct += (pred == batch["labels"]).sum().item()
            total += batch["labels"].numel()
    model.train()
    return correct / max(total, 1)


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(args.seed)
    corpus = [ex["claim"] for ex in CLAIMS] + [s for ex in CLAIMS for s in ex["evidence"]]
    tokenizer = train_tokenizer(corpus)
    log.info("tokenizer: %d pieces", len(tokenizer))

    collate = ClaimCollator(tokenizer, LOADER["max_length"])
    loader = DataLoader(ClaimDataset(CLAIMS), batch_size=args.batch_size, shuffle=False, collate_fn=collate,
                        num_workers=LOADER["num_workers"],
                        multiprocessing_context=LOADER["multiprocessing_context"], persistent_workers=False)
    config = MobileBertConfig(vocab_size=len(tokenizer), num_labels=len(LABELS), pad_token_id=tokenizer.pad_token_id,
                              **MODEL)
    model = MobileBertForSequenceClassification(config)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    for epoch in range(args.epochs):
        t0, seen, total_loss = time.perf_counter(), 0, 0.0
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            total_loss += loss.item() * batch["labels"].numel()
            seen += batch["labels"].numel()
            log.info("epoch %d step %d loss %.3f", epoch, step, loss.item())
        log.info("epoch %d: mean loss %.3f over %d claims (%.1fs)", epoch, total_loss / seen, seen,
                 time.perf_counter() - t0)
        log.info("epoch %d: train accuracy %.2f", epoch, evaluate(model, loader))


if __name__ == "__main__":
    main()
