"""Train, export and smoke-test the smart-home intent classifier (tiny RoFormer).

A WordPiece vocabulary is trained in code on the utterances, the classifier is fine-tuned for a
few epochs, model and tokenizer are exported with save_pretrained, and the export is reloaded the
way the serving box loads it (half precision there) to check that predictions survive the trip.

    python ckpt_roformer_intent_export.py --epochs 3 --serve-dtype bf16
"""
import argparse
import logging
import shutil
import tempfile

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast, RoFormerConfig, RoFormerForSequenceClassification

log = logging.getLogger("intent-export")

INTENTS = {
    "lights_on": ["turn on the kitchen lights", "switch the lights on please", "lights on in the hallway",
                  "can you turn the bedroom lamp on"],
    "lights_off": ["turn off the kitchen lights", "switch all lights off", "lights off in the bedroom",
                   "kill the hallway lamp"],
    "set_temp": ["set the heating to twenty degrees", "make it warmer in the living room",
                 "lower the thermostat by two degrees", "set temperature to eighteen"],
    "play_music": ["play some jazz in the kitchen", "put on my running playlist", "play the news podcast",
                   "start the morning playlist in the bedroom"],
}
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ARCH = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            embedding_size=32, max_position_embeddings=64, rotary_value=False)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--vocab-size", type=int, default=120)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--serve-dtype", default="bf16", choices=["fp32", "bf16", "fp16"],
                   help="precision of the serving box")
    return p.parse_args()


def train_wordpiece(texts, vocab_size):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL))
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                       special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=ARCH["max_position_embeddings"])


def dataset():
    labels = sorted(INTENTS)
    rows = [(text, labels.index(intent)) for intent in labels for text in INTENTS[intent]]
    return rows, labels


def batches(rows, size, generator):
    order = torch.randperm(len(rows), generator=generator).tolist()
    for i in range(0, len(order), size):
        yield [rows[j] for j in order[i:i + size]]


def predict(model, tok, texts):
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**enc).logits.float().argmax(-1).tolist()


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(args.seed)
    rows, labels = dataset()
    tok = train_wordpiece([t for t, _ in rows], args.vocab_size)
    log.info("wordpiece vocab: %d tokens", len(tok))
    config = RoFormerConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, num_labels=len(labels),
                            id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)}, **ARCH)
    model = RoFormerForSequenceClassification(config)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for batch in batches(rows, 4, gen):
            enc = tok([t for t, _ in batch], padding=True, return_tensors="pt")
            out = model(**enc, labels=torch.tensor([y for _, y in batch]))
            out.loss.backward()
            opt.step()
            opt.zero_grad()
            total += out.loss.item()
        log.info("epoch %d loss %.4f", epoch, total)
    model.eval()
    probe = ["turn on the lamp", "play jazz", "set the heating to eighteen degrees"]
    before = predict(model, tok, probe)

    export_dir = tempfile.mkdtemp(prefix="intent-export-")
    try:
        model.save_pretrained(export_dir)
        tok.save_pretrained(export_dir)
        log.info("exported to %s", export_dir)
        # reload the way the serving box does
        served_tok = AutoTokenizer.from_pretrained(export_dir)
        served = RoFormerForSequenceClassification.from_pretrained(export_dir, dtype=args.serve_dtype)
        served.eval()
        after = predict(served, served_tok, probe)
        for text, a, b in zip(probe, before, after):
            log.info("%-40s %-12s %-12s %s", text, labels[a], labels[b], "ok" if a == b else "CHANGED")
        agree = sum(a == b for a, b in zip(before, after))
        log.info("%d/%d predictions unchanged after export at %s", agree, len(probe), args.serve_dtype)
    finally:
        shutil.rmtree(export_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
