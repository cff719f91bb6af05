"""Encode long support documents with a small BERT encoder: chunk -> left-pad -> masks ->
position ids -> encoder -> masked mean pool -> per-document vector (mean over chunks).

The batching helpers are shared with the decoder-side pipeline, which is why padding is on
the left and position ids are computed from the attention mask.

    python chunked_doc_encoder.py --chunk-len 96 --batch-size 2
"""
import argparse
import math
import random

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

ENCODER = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
TOPICS = {
    "billing": "invoice payment card charged refund amount due monthly plan upgrade downgrade",
    "shipping": "package courier tracking delivered delayed address warehouse label customs",
    "login": "password reset account locked two factor code email verify session expired",
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chunk-len", type=int, default=96)
    p.add_argument("--stride", type=int, default=80)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--seed", type=int, default=5)
    return p.parse_args()


def build_tokenizer():
    words = sorted({w for text in TOPICS.values() for w in text.split()})
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + words)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def make_documents(rng):
    docs = []
    for topic, text in TOPICS.items():
        words = text.split()
        for n_words in (12, 40, 150):
            docs.append((topic, " ".join(rng.choice(words) for _ in range(n_words))))
    return docs


def chunk_ids(ids, chunk_len, stride, cls_id, sep_id):
    body = chunk_len - 2
    chunks = []
    for start in range(0, max(len(ids), 1), stride):
        piece = ids[start:start + body]
        chunks.append([cls_id] + piece + [sep_id])
        if start + body >= len(ids):
            break
    return chunks


def pad_left(seqs, pad_id):
    width = max(len(s) for s in seqs)
    return torch.tensor([[pad_id] * (width - len(s)) + s for s in seqs], dtype=torch.long)


def attention_mask_from(input_ids, pad_id):
    return (input_ids != pad_id).long()


def position_ids_from(attention_mask):
    # left padding: real tokens must start at position 0
    pos = attention_mask.cumsum(dim=-1) - 1
    return pos.clamp(min=0) * attention_mask


def masked_mean(hidden, mask):
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)


@torch.no_grad()
def encode_documents(model, tok, docs, args):
    flat, owner = [], []
    for d, (_, text) in enumerate(docs):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        for c in chunk_ids(ids, args.chunk_len, args.stride, tok.cls_token_id, tok.sep_token_id):
            flat.append(c)
            owner.append(d)
    print(f"{len(docs)} docs -> {len(flat)} chunks (chunk_len={args.chunk_len})")
    vectors = torch.zeros(len(docs), model.config.hidden_size)
    counts = torch.zeros(len(docs))
    for b in range(0, len(flat), args.batch_size):
        input_ids = pad_left(flat[b:b + args.batch_size], tok.pad_token_id)
        attention_mask = attention_mask_from(input_ids, tok.pad_token_id)
        position_ids = position_ids_from(attention_mask)
        out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)
        pooled = F.normalize(masked_mean(out.last_hidden_state, attention_mask), dim=-1)
        for row, d in enumerate(owner[b:b + args.batch_size]):
            vectors[d] += pooled[row]
            counts[d] += 1
    return F.normalize(vectors / counts.unsqueeze(-1), dim=-1)


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    tok = build_tokenizer()
    model = BertModel(BertConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, **ENCODER),
                      add_pooling_layer=False).eval()
    docs = make_documents(rng)
    vecs = encode_documents(model, tok, docs, args)
    sims = vecs @ vecs.T
    for i, (topic, text) in enumerate(docs):
        j = max((k for k in range(len(docs)) if k != i), key=lambda k: sims[i, k].item())
        print(f"{topic:9s} len={len(text.split()):4d} nearest={docs[j][0]:9s} "
              f"sim={sims[i, j]:.3f} ang={math.degrees(math.acos(min(1.0, sims[i, j].item()))):.1f}")


if __name__ == "__main__":
    main()
