"""Zero-shot tagging of support backlogs with a small in-house NLI model (ConvBERT), one pool job per queue.

The parent fits the NLI head for a few steps on canned premise/hypothesis pairs, saves model and
tokenizer into one folder, and hands the folder to a spawn pool: each job loads a zero-shot
pipeline from it and tags one queue's tickets with that queue's labels and hypothesis template
(the templates come from each queue's routing config).

    python pool_convbert_zeroshot_tagging.py --workers 2
"""
import argparse
import logging
import multiprocessing as mp
import shutil
import tempfile

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import (ConvBertConfig, ConvBertForSequenceClassification, PreTrainedTokenizerFast,
                          pipeline)

log = logging.getLogger("zeroshot-tagging")

NLI_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}
ARCH = dict(hidden_size=32, embedding_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            head_ratio=2, conv_kernel_size=3, max_position_embeddings=64)

NLI_PAIRS = [
    ("my card was charged twice", "this text is about billing", 0),
    ("the app crashes on start", "this text is about billing", 2),
    ("the parcel never arrived", "this text is about delivery", 0),
    ("i cannot reset my password", "this text is about login", 0),
    ("the parcel never arrived", "this text is about login", 2),
    ("please add a dark mode", "this text is about delivery", 1),
]

# routing config per queue: (tickets, candidate labels, hypothesis template)
QUEUES = {
    "web": (["site is slow at checkout", "refund not received yet", "login link expired"],
            ["billing", "delivery", "login"], "this text is about {}"),
    "mobile": (["app crashes on start", "push alerts arrive late"], ["crash", "alerts", "billing"],
               "this text is about {}"),
    "partners": (["invoice shows wrong vat", "api key revoked"], ["billing", "login"],
                 "this ticket is about %s"),
    "retail": (["parcel left at wrong door", "courier was rude"], ["delivery", "staff"], "this text is about {}"),
}


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def build_tokenizer():
    words = {w for p, h, _ in NLI_PAIRS for w in (p + " " + h).split()}
    for tickets, labels, template in QUEUES.values():
        words.update(w for t in tickets + labels + [template] for w in t.split())
    vocab = {tok: i for i, tok in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + sorted(words))}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", model_max_length=64)


def fit_and_save(out_dir, args):
    torch.manual_seed(args.seed)
    tok = build_tokenizer()
    config = ConvBertConfig(vocab_size=len(tok), num_labels=3, id2label=NLI_LABELS,
                            label2id={v: k for k, v in NLI_LABELS.items()}, pad_token_id=tok.pad_token_id, **ARCH)
    model = ConvBertForSequenceClassification(config)
    enc = tok([p for p, _, _ in NLI_PAIRS], [h for _, h, _ in NLI_PAIRS], padding=True, return_tensors="pt")
    labels = torch.tensor([y for _, _, y in NLI_PAIRS])
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for step in range(args.steps):
        loss = model(**enc, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        log.info("nli step %d loss %.4f", step, loss.item())
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)


def tag_queue(model_dir, queue, tickets, labels, template):
    torch.set_num_threads(1)
    clf = pipeline("zero-shot-classification", model=model_dir, tokenizer=model_dir, device=-1)
    results = clf(tickets, candidate_labels=labels, hypothesis_template=template)
    return queue, [(r["sequence"], r["labels"][0], round(r["scores"][0], 3)) for r in results]


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(processName)s %(message)s")
    model_dir = tempfile.mkdtemp(prefix="nli-model-")
    try:
        fit_and_save(model_dir, args)
        jobs = [(model_dir, name, tickets, labels, template)
                for name, (tickets, labels, template) in QUEUES.items()]
        with mp.get_context("spawn").Pool(args.workers) as pool:
            tagged = pool.starmap(tag_queue, jobs)
        for queue, rows in tagged:
            for text, label, score in rows:
                log.info("[%s] %-30s -> %s (%.3f)", queue, text, label, score)
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
