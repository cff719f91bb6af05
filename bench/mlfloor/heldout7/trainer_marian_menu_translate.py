"""Menu-line translation (EN -> FR) with a tiny Marian model and Seq2SeqTrainer.

The restaurant app translates menu lines; this script is the training recipe on a toy parallel
set built in code. Evaluation generates translations and scores them with our own token-F1 and
exact-match metric (the real run adds chrF).

    python trainer_marian_menu_translate.py --epochs 2 --eval-batch-size 3
"""
import argparse
import logging
import shutil
import tempfile

import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers
from tokenizers.processors import TemplateProcessing
from transformers import (DataCollatorForSeq2Seq, MarianConfig, MarianMTModel, PreTrainedTokenizerFast,
                          Seq2SeqTrainer, Seq2SeqTrainingArguments, set_seed)

log = logging.getLogger("menu-mt")

PAIRS = [
    ("grilled chicken with rice", "poulet grille avec riz"),
    ("fish soup", "soupe de poisson"),
    ("chocolate cake with cream", "gateau au chocolat avec creme"),
    ("green salad", "salade verte"),
    ("beef stew with potatoes and carrots", "ragout de boeuf avec pommes de terre et carottes"),
    ("onion soup", "soupe a l oignon"),
    ("apple tart", "tarte aux pommes"),
    ("grilled fish with green salad", "poisson grille avec salade verte"),
    ("chicken soup", "soupe de poulet"),
    ("cheese plate", "assiette de fromages"),
    ("rice pudding with cream", "riz au lait avec creme"),
    ("roast beef with carrots", "roti de boeuf avec carottes"),
]
ARCH = dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, scale_embedding=True)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--eval-batch-size", type=int, default=3)
    p.add_argument("--gen-max-length", type=int, default=16)
    p.add_argument("--seed", type=int, default=21)
    return p.parse_args()


def build_tokenizer(pairs):
    vocab = {"<pad>": 0, "<unk>": 1, "</s>": 2}
    for src, tgt in pairs:
        for w in (src + " " + tgt).split():
            vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="</s>")


def encode_pairs(pairs, tok):
    rows = []
    for src, tgt in pairs:
        enc = tok(src)
        enc["labels"] = tok(text_target=tgt)["input_ids"]
        rows.append(dict(enc))
    return rows


def token_f1(pred, ref):
    p, r = pred.split(), ref.split()
    common = sum(min(p.count(w), r.count(w)) for w in set(p))
    if not common:
        return 0.0
    prec, rec = common / len(p), common / len(r)
    return 2 * prec * rec / (prec + rec)


def make_compute_metrics(tok):
    def compute_metrics(eval_pred):
        preds, labels = eval_pred
        if isinstance(preds, tuple):
            preds = preds[0]
        decoded_preds = tok.batch_decode(preds, skip_special_tokens=True)
        decoded_labels = tok.batch_decode(labels, skip_special_tokens=True)
        f1 = [token_f1(p, r) for p, r in zip(decoded_preds, decoded_labels)]
        exact = [p.strip() == r.strip() for p, r in zip(decoded_preds, decoded_labels)]
        return {"token_f1": float(np.mean(f1)), "exact": float(np.mean(exact))}
    return compute_metrics


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    set_seed(args.seed)
    tok = build_tokenizer(PAIRS)
    config = MarianConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                          decoder_start_token_id=tok.pad_token_id, forced_eos_token_id=tok.eos_token_id, **ARCH)
    model = MarianMTModel(config)
    train_rows, eval_rows = encode_pairs(PAIRS[:9], tok), encode_pairs(PAIRS[9:] + PAIRS[:3], tok)
    out_dir = tempfile.mkdtemp(prefix="menu-mt-")
    try:
        training_args = Seq2SeqTrainingArguments(
            output_dir=out_dir, num_train_epochs=args.epochs, learning_rate=args.lr,
            per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=args.eval_batch_size,
            eval_strategy="epoch", save_strategy="no", logging_steps=1, report_to=[], use_cpu=True,
            seed=args.seed, predict_with_generate=True, generation_max_length=args.gen_max_length,
            generation_num_beams=1, dataloader_num_workers=0)
        collator = DataCollatorForSeq2Seq(tok, model=model, label_pad_token_id=-100, padding=True)
        trainer = Seq2SeqTrainer(model=model, args=training_args, train_dataset=train_rows, eval_dataset=eval_rows,
                                 data_collator=collator, processing_class=tok,
                                 compute_metrics=make_compute_metrics(tok))
        log.info("%d train / %d eval pairs, vocab %d", len(train_rows), len(eval_rows), len(tok))
        trainer.train()
        metrics = trainer.evaluate()
        log.info("final: %s", {k: round(v, 3) for k, v in metrics.items() if isinstance(v, float)})
        sample = tok(["fish soup with rice"], return_tensors="pt")
        out = model.generate(**sample, max_length=args.gen_max_length)
        log.info("sample: %s", tok.decode(out[0], skip_special_tokens=True))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
