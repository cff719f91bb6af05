"""Passage-window service for the help-centre search index (Unigram tokenizer trained in code, ERNIE encoder).

Each request names a document and the window size its index uses; the service cuts the document
into overlapping windows (SERVICE['stride'] tokens shared between neighbours), keeps each window's
character span from the offsets so hits can be highlighted, and embeds the windows with a small
ERNIE encoder (mean pooling). Requests are served by a thread pool, as behind the HTTP front end.

    python thread_ernie_passage_windows.py --workers 2
"""
import argparse
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import ErnieConfig, ErnieModel, PreTrainedTokenizerFast

log = logging.getLogger("passage-windows")

SERVICE = {"stride": 6, "pad_to": "max_length", "vocab_size": 120}
ENCODER = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
               max_position_embeddings=64, use_task_id=False)

DOCS = {
    "reset-password": "To reset your password open Settings, choose Account and press Reset password. "
                      "A link is sent to your email address and stays valid for thirty minutes.",
    "export-data": "You can export all your data as a zip file. Open Settings, choose Privacy and press "
                   "Export. Large accounts can take a few hours; we email you when the file is ready.",
    "delete-account": "Deleting your account removes your projects and invoices after fourteen days.",
    "two-factor": "Turn on two factor login in Settings under Security and scan the code with your app.",
}

# replayed from the indexer's request log: (doc id, window size of the index that asked)
REQUESTS = [("reset-password", 32), ("export-data", 24), ("two-factor", 32), ("delete-account", 6),
            ("export-data", 32)]


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=8)
    return p.parse_args()


def train_tokenizer(texts, vocab_size):
    tk = Tokenizer(models.Unigram())
    tk.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(),
                                          normalizers.Replace("  ", " ")])
    tk.pre_tokenizer = pre_tokenizers.Metaspace()
    tk.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=vocab_size, unk_token="[UNK]",
                                      special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    tk.train_from_iterator(texts, trainer=trainer)
    cls_id, sep_id = tk.token_to_id("[CLS]"), tk.token_to_id("[SEP]")
    tk.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                      special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", model_max_length=64)


class WindowService:
    def __init__(self, tokenizer, model, stride, pad_to):
        self.tok = tokenizer
        self.model = model.eval()
        self.stride = stride
        self.pad_to = pad_to
        # a fast tokenizer's truncation settings are shared state: one request at a time changes them
        self.tok_lock = threading.Lock()

    def windows(self, doc_id, window):
        text = DOCS[doc_id]
        with self.tok_lock:
            enc = self.tok(text, max_length=window, truncation=True, stride=self.stride,
                           return_overflowing_tokens=True, return_offsets_mapping=True,
                           padding=self.pad_to, return_tensors="pt")
        offsets = enc.pop("offset_mapping")
        enc.pop("overflow_to_sample_mapping", None)
        with torch.no_grad():
            hidden = self.model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        vectors = (hidden * mask).sum(1) / mask.sum(1)
        spans = []
        for row in offsets.tolist():
            real = [(s, e) for s, e in row if e > s]
            spans.append((real[0][0], real[-1][1]) if real else (0, 0))
        return vectors, spans

    def handle(self, request_id, doc_id, window):
        t0 = time.perf_counter()
        vectors, spans = self.windows(doc_id, window)
        preview = [DOCS[doc_id][s:e][:24] for s, e in spans]
        log.info("request %d %s window=%d -> %d windows in %.0f ms", request_id, doc_id, window, len(spans),
                 1000 * (time.perf_counter() - t0))
        return {"id": request_id, "doc": doc_id, "vectors": vectors, "spans": spans, "preview": preview}


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")
    torch.manual_seed(args.seed)
    tok = train_tokenizer(list(DOCS.values()) * 4, SERVICE["vocab_size"])
    log.info("tokenizer: %d pieces, sample %s", len(tok), tok.tokenize("reset your password")[:6])
    config = ErnieConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, **ENCODER)
    service = WindowService(tok, ErnieModel(config), SERVICE["stride"], SERVICE["pad_to"])
    index = {}
    with ThreadPoolExecutor(max_workers=args.workers, thread_name_prefix="win") as pool:
        futures = [pool.submit(service.handle, i, doc, window) for i, (doc, window) in enumerate(REQUESTS)]
        for fut in futures:
            res = fut.result()
            index.setdefault(res["doc"], []).extend(zip(res["spans"], res["vectors"]))
            log.info("indexed %s: %s", res["doc"], res["preview"])
    log.info("index holds %d windows over %d documents", sum(map(len, index.values())), len(index))


if __name__ == "__main__":
    main()
