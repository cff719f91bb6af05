"""Ticket triage with a LoRA adapter on a tiny ModernBERT; the label set grows between releases.

v1 of the triage model knew three queues. Product added a fourth (feature requests), so v2 starts
from the v1 adapter (LoRA on the attention projections, classifier head trained in full via
modules_to_save) and keeps training on the new label set instead of starting over.

    python peft_modernbert_triage_labels.py --epochs 2 --rank 4
"""
import argparse
import logging
import shutil
import tempfile

import torch
from peft import LoraConfig, PeftModel, TaskType, get_peft_model
from transformers import ModernBertConfig, ModernBertForSequenceClassification

log = logging.getLogger("triage")

LABELS_V1 = ["billing", "bug", "account"]
LABELS_V2 = LABELS_V1 + ["feature_request"]
TICKETS = [
    ("i was charged twice this month", "billing"), ("refund my last invoice", "billing"),
    ("the export button crashes the app", "bug"), ("search returns an error page", "bug"),
    ("reset my password please", "account"), ("how do i change my email address", "account"),
    ("please add a dark mode", "feature_request"), ("it would be great to export to pdf", "feature_request"),
    ("the invoice total is wrong", "billing"), ("login loops back to the start page", "bug"),
]
BACKBONE = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=64, global_attn_every_n_layers=1, local_attention=16,
                classifier_pooling="mean")
LORA = dict(lora_alpha=16, lora_dropout=0.0, target_modules=["Wqkv", "Wo"], modules_to_save=["classifier"])


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--rank", type=int, default=4)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--seed", type=int, default=17)
    return p.parse_args()


def build_vocab(texts):
    vocab = {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[UNK]": 3}
    for t in texts:
        for w in t.split():
            vocab.setdefault(w, len(vocab))
    return vocab


def encode(texts, vocab):
    rows = [[1] + [vocab.get(w, 3) for w in t.split()] + [2] for t in texts]
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    return ids, (ids != 0).long()


def backbone(vocab, labels):
    config = ModernBertConfig(vocab_size=len(vocab), pad_token_id=0, cls_token_id=1, sep_token_id=2,
                              bos_token_id=1, eos_token_id=2, num_labels=len(labels),
                              id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)},
                              **BACKBONE)
    return ModernBertForSequenceClassification(config)


def train(model, vocab, labels, args, tag):
    rows = [(t, labels.index(y)) for t, y in TICKETS if y in labels]
    ids, mask = encode([t for t, _ in rows], vocab)
    y = torch.tensor([l for _, l in rows])
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    model.train()
    for epoch in range(args.epochs):
        for i in range(0, len(rows), 4):
            out = model(input_ids=ids[i:i + 4], attention_mask=mask[i:i + 4], labels=y[i:i + 4])
            out.loss.backward()
            opt.step()
            opt.zero_grad()
        log.info("[%s] epoch %d loss %.4f", tag, epoch, out.loss.item())
    model.eval()
    with torch.no_grad():
        acc = (model(input_ids=ids, attention_mask=mask).logits.argmax(-1) == y).float().mean().item()
    log.info("[%s] train accuracy %.2f on %d tickets", tag, acc, len(rows))
    return acc


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(args.seed)
    vocab = build_vocab(t for t, _ in TICKETS)
    work = tempfile.mkdtemp(prefix="triage-")
    try:
        # release v1: three queues
        v1 = get_peft_model(backbone(vocab, LABELS_V1), LoraConfig(task_type=TaskType.SEQ_CLS, r=args.rank, **LORA))
        v1.print_trainable_parameters()
        train(v1, vocab, LABELS_V1, args, "v1")
        v1.save_pretrained(f"{work}/adapter-v1")
        log.info("saved v1 adapter")

        # release v2: continue from the v1 adapter with the new queue added
        base_v2 = backbone(vocab, LABELS_V2)
        v2 = PeftModel.from_pretrained(base_v2, f"{work}/adapter-v1", is_trainable=True)
        v2.print_trainable_parameters()
        train(v2, vocab, LABELS_V2, args, "v2")
        v2.save_pretrained(f"{work}/adapter-v2")
        log.info("saved v2 adapter with %d labels", len(LABELS_V2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
