"""Generate short listing titles from seller descriptions with a BERT2BERT model, in a process pool.

The parent warm-starts a tiny encoder-decoder, fine-tunes it for a few steps on the labelled
pairs and saves the checkpoint; each pool worker loads the checkpoint once in its initializer and
then serves batches of descriptions.

    python pool_title_generator.py --ckpt title_ckpt --workers 2 --batch-size 3
"""
import argparse
import concurrent.futures as cf
import logging
import multiprocessing as mp
import os
import time

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import (AutoTokenizer, BertConfig, EncoderDecoderConfig, EncoderDecoderModel,
                          PreTrainedTokenizerFast)

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(message)s")
log = logging.getLogger("titles")

BERT = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64)
GEN = {"max_new_tokens": 8, "num_beams": 2, "no_repeat_ngram_size": 2, "early_stopping": True}

LABELLED = [
    ("vintage oak dining table seats six with two extension leaves", "oak dining table"),
    ("barely used road bike aluminium frame size medium", "aluminium road bike"),
    ("set of four ceramic plates hand painted blue pattern", "ceramic plates set"),
    ("kids winter jacket waterproof size six years red", "kids winter jacket"),
    ("espresso machine with milk frother works perfectly", "espresso machine"),
]
UNLABELLED = [
    "leather office chair with armrests black",
    "solid pine bookshelf five shelves",
    "waterproof hiking boots size nine brown",
    "electric guitar with amplifier and cable",
    "glass coffee table with metal legs",
    "baby stroller foldable grey",
    "gaming laptop sixteen gigabytes memory",
]

_model = None
_tok = None


def build_tokenizer():
    text = " ".join(d + " " + t for d, t in LABELLED) + " " + " ".join(UNLABELLED)
    words = sorted(set(text.split()))
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + words)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def finetune_and_save(ckpt, steps, lr):
    tok = build_tokenizer()
    enc_cfg = BertConfig(vocab_size=len(tok), **BERT)
    dec_cfg = BertConfig(vocab_size=len(tok), is_decoder=True, add_cross_attention=True, **BERT)
    torch.manual_seed(0)
    model = EncoderDecoderModel(EncoderDecoderConfig.from_encoder_decoder_configs(enc_cfg, dec_cfg))
    # as in the BERT2BERT docs: the decoder starts from [CLS] and pads with [PAD]
    model.config.decoder_start_token_id = tok.cls_token_id
    model.config.pad_token_id = tok.pad_token_id
    model.config.eos_token_id = tok.sep_token_id

    src = tok([d for d, _ in LABELLED], padding=True, return_tensors="pt")
    tgt = tok([t for _, t in LABELLED], padding=True, return_tensors="pt")
    labels = tgt["input_ids"].masked_fill(tgt["attention_mask"] == 0, -100)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        loss = model(input_ids=src["input_ids"], attention_mask=src["attention_mask"],
                     labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        log.info("step %d loss %.4f", step, loss.item())
    model.save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    return ckpt


def init_worker(ckpt, threads):
    global _model, _tok
    torch.set_num_threads(threads)
    _tok = AutoTokenizer.from_pretrained(ckpt)
    _model = EncoderDecoderModel.from_pretrained(ckpt).eval()
    log.info("worker %d loaded %s", os.getpid(), ckpt)


def generate_titles(batch, gen_kwargs):
    enc = _tok(batch, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = _model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                              **gen_kwargs)
    return [_tok.decode(o, skip_special_tokens=True) for o in out]


def chunks(items, n):
    return [items[i:i + n] for i in range(0, len(items), n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", default="title_ckpt")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    t0 = time.time()
    ckpt = finetune_and_save(args.ckpt, args.steps, args.lr)
    log.info("checkpoint ready in %.1fs", time.time() - t0)

    ctx = mp.get_context("spawn")
    results = {}
    with cf.ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx, initializer=init_worker,
                                initargs=(ckpt, 1)) as pool:
        futures = {pool.submit(generate_titles, batch, GEN): i
                   for i, batch in enumerate(chunks(UNLABELLED, args.batch_size))}
        for fut in cf.as_completed(futures):
            results[futures[fut]] = fut.result()
    for i in sorted(results):
        for title in results[i]:
            print(title)
    log.info("done in %.1fs", time.time() - t0)


if __name__ == "__main__":
    main()
