"""Keyword spotting on synthetic 'wake word' clips with a tiny Whisper encoder classifier.

Clips are generated in code (tone patterns plus noise, one pattern per keyword); features are our
own log-mel front end in numpy (the production one runs on a DSP, so we mirror it here instead of
using WhisperFeatureExtractor), padded or trimmed to the encoder's frame count.

    python whisper_kws_logmel.py --epochs 2 --clips-per-word 6
"""
import argparse
import logging

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
from transformers import WhisperConfig, WhisperForAudioClassification

log = logging.getLogger("kws")

SAMPLE_RATE = 4000
FEATURES = {"n_fft": 128, "hop": 64, "n_mels": 16, "fmin": 50.0, "fmax": 1800.0}
KEYWORDS = {"hey_box": (440.0, 660.0), "stop": (300.0, 300.0), "next": (880.0, 520.0),
            "_silence": (0.0, 0.0)}
ENCODER = dict(d_model=32, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=64,
               decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=64,
               max_source_positions=16, max_target_positions=16, vocab_size=64)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--clips-per-word", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--clip-seconds", type=float, default=0.5)
    return ap.parse_args()


def synth_clip(freqs, seconds, rng):
    t = np.arange(int(SAMPLE_RATE * seconds)) / SAMPLE_RATE
    half = len(t) // 2
    wave = np.zeros_like(t)
    if freqs[0] > 0:
        wave[:half] = np.sin(2 * np.pi * freqs[0] * t[:half])
        wave[half:] = np.sin(2 * np.pi * freqs[1] * t[half:])
    return wave + 0.05 * rng.standard_normal(len(t))


def mel_filterbank(n_fft, n_mels, fmin, fmax):
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10 ** (m / 2595.0) - 1.0)

    mels = np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2)
    bins = np.floor((n_fft + 1) * mel_to_hz(mels) / SAMPLE_RATE).astype(int)
    fb = np.zeros((n_mels, n_fft // 2 + 1))
    for m in range(1, n_mels + 1):
        lo, mid, hi = bins[m - 1], bins[m], bins[m + 1]
        for k in range(lo, mid):
            fb[m - 1, k] = (k - lo) / max(mid - lo, 1)
        for k in range(mid, hi):
            fb[m - 1, k] = (hi - k) / max(hi - mid, 1)
    return fb


def log_mel(wave, fb, n_fft, hop, n_frames):
    window = np.hanning(n_fft)
    frames = [wave[i:i + n_fft] * window for i in range(0, len(wave) - n_fft + 1, hop)]
    power = np.abs(np.fft.rfft(np.stack(frames), axis=1)) ** 2
    feats = np.log10(np.maximum(power @ fb.T, 1e-10)).T          # (n_mels, frames)
    feats = (feats - feats.mean()) / (feats.std() + 1e-6)
    if feats.shape[1] < n_frames:
        feats = np.pad(feats, ((0, 0), (0, n_frames - feats.shape[1])), constant_values=feats.min())
    return feats[:, :n_frames]


class ClipDataset(Dataset):
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        feats, label = self.items[i]
        return torch.from_numpy(feats), torch.tensor(label)


def make_items(args, n_frames):
    rng = np.random.default_rng(args.seed)
    fb = mel_filterbank(FEATURES["n_fft"], FEATURES["n_mels"], FEATURES["fmin"], FEATURES["fmax"])
    items = []
    for label, freqs in enumerate(KEYWORDS.values()):
        for _ in range(args.clips_per_word):
            wave = synth_clip(freqs, args.clip_seconds, rng)
            items.append((log_mel(wave, fb, FEATURES["n_fft"], FEATURES["hop"], n_frames), label))
    rng.shuffle(items)
    return items


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(args.seed)
    labels = list(KEYWORDS)
    config = WhisperConfig(num_mel_bins=FEATURES["n_mels"], num_labels=len(labels),
                           id2label=dict(enumerate(labels)),
                           label2id={l: i for i, l in enumerate(labels)}, **ENCODER)
    # the encoder's two convolutions halve the time axis: it wants 2 * max_source_positions frames
    n_frames = 2 * config.max_source_positions
    items = make_items(args, n_frames)
    split = int(0.75 * len(items))
    train_dl = DataLoader(ClipDataset(items[:split]), batch_size=args.batch_size, shuffle=True)
    eval_dl = DataLoader(ClipDataset(items[split:]), batch_size=args.batch_size)
    log.info("%d train / %d eval clips, features %s", split, len(items) - split, items[0][0].shape)

    model = WhisperForAudioClassification(config)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for feats, y in train_dl:
            out = model(input_features=feats, labels=y)
            out.loss.backward()
            opt.step()
            opt.zero_grad()
            total += out.loss.item()
        model.eval()
        hits = 0
        with torch.no_grad():
            for feats, y in eval_dl:
                hits += (model(input_features=feats).logits.argmax(-1) == y).sum().item()
        log.info("epoch %d loss %.3f eval acc %.2f", epoch, total / len(train_dl),
                 hits / (len(items) - split))


if __name__ == "__main__":
    main()
