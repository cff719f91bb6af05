"""Call-centre emotion tagging: a tiny HuBERT classifier on synthetic phone-line clips.

Phone audio arrives at 8 kHz. Clips are synthesised here (a pitch contour per emotion plus line
noise) so the pipeline can be tested without customer recordings; the collate function turns raw
waveforms into model inputs with a Wav2Vec2-style feature extractor in the loader's worker
processes, as the production loader does.

    python loader_hubert_callcenter_emotion.py --epochs 2 --workers 2
"""
import argparse
import logging
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
from transformers import HubertConfig, HubertForSequenceClassification, Wav2Vec2FeatureExtractor

log = logging.getLogger("cc-emotion")

EMOTIONS = ["neutral", "angry", "happy", "sad"]
LINE_RATE = 8000  # Hz, what the telephony gateway hands us

ENCODER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               conv_dim=(16, 16, 16), conv_stride=(5, 4, 2), conv_kernel=(10, 4, 2),
               num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, feat_proj_dropout=0.0,
               hidden_dropout=0.0, mask_time_prob=0.0, use_weighted_layer_sum=False,
               classifier_proj_size=16)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--clips-per-emotion", type=int, default=4)
    p.add_argument("--seconds", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=3)
    return p.parse_args()


def synth_clip(emotion, seconds, rng, rate=LINE_RATE):
    t = np.arange(int(seconds * rate)) / rate
    base = {"neutral": 140.0, "angry": 220.0, "happy": 260.0, "sad": 110.0}[emotion]
    wobble = {"neutral": 5.0, "angry": 40.0, "happy": 25.0, "sad": 3.0}[emotion]
    pitch = base + wobble * np.sin(2 * np.pi * 3 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    clip = 0.4 * np.sin(phase) + 0.1 * np.sin(2 * phase)
    clip += 0.02 * rng.standard_normal(len(t))  # line hiss
    length = int(len(clip) * rng.uniform(0.7, 1.0))  # callers do not all talk for the same time
    return clip[:length].astype(np.float32)


class ClipDataset(Dataset):
    def __init__(self, clips):
        self.clips = clips

    def __len__(self):
        return len(self.clips)

    def __getitem__(self, i):
        wave, label = self.clips[i]
        return {"wave": wave, "label": label}


class SpeechCollator:
    """Runs in the loader workers: raw waves -> padded, normalised input_values."""

    def __init__(self, extractor, rate):
        self.extractor = extractor
        self.rate = rate

    def __call__(self, items):
        feats = self.extractor([it["wave"] for it in items], sampling_rate=self.rate, padding=True,
                               return_attention_mask=True, return_tensors="pt")
        feats["labels"] = torch.tensor([it["label"] for it in items])
        return feats


def make_clips(args):
    rng = np.random.default_rng(args.seed)
    clips = []
    for label, emotion in enumerate(EMOTIONS):
        for _ in range(args.clips_per_emotion):
            clips.append((synth_clip(emotion, args.seconds, rng), label))
    rng.shuffle(clips)
    return clips


def accuracy(model, loader):
    model.eval()
    hit = total = 0
    with torch.no_grad():
        for batch in loader:
            logits = model(**batch).logits
            hit += (logits.argmax(-1) == batch["labels"]).sum().item()
            total += len(batch["labels"])
    return hit / max(total, 1)


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    torch.manual_seed(args.seed)
    clips = make_clips(args)
    split = int(0.75 * len(clips))
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0,
                                         do_normalize=True, return_attention_mask=True)
    collate = SpeechCollator(extractor, LINE_RATE)
    loader_kw = dict(batch_size=args.batch_size, collate_fn=collate, num_workers=args.workers,
                     multiprocessing_context="spawn", persistent_workers=False)
    train_loader = DataLoader(ClipDataset(clips[:split]), shuffle=True, **loader_kw)
    eval_loader = DataLoader(ClipDataset(clips[split:]), shuffle=False, **loader_kw)
    config = HubertConfig(num_labels=len(EMOTIONS), id2label=dict(enumerate(EMOTIONS)),
                          label2id={e: i for i, e in enumerate(EMOTIONS)}, **ENCODER)
    model = HubertForSequenceClassification(config)
    model.freeze_feature_encoder()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    log.info("%d train / %d eval clips, %d trainable params", split, len(clips) - split,
             sum(p.numel() for p in model.parameters() if p.requires_grad))
    for epoch in range(args.epochs):
        model.train()
        t0, seen, running = time.time(), 0, 0.0
        for batch in train_loader:
            loss = model(**batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            running += loss.item() * len(batch["labels"])
            seen += len(batch["labels"])
        log.info("epoch %d loss %.4f eval acc %.2f (%.1fs)", epoch, running / max(seen, 1),
                 accuracy(model, eval_loader), time.time() - t0)
    log.info("final eval acc %.2f", accuracy(model, eval_loader))


if __name__ == "__main__":
    main()
