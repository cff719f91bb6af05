"""Door-intercom command recogniser: a small WavLM classifier fine-tuned on the intercom's WAV uploads.

The intercom uploads 16-bit mono WAV files at 8 kHz. The loader reads the frames with the standard
`wave` module, crops or zero-pads every clip to CLIP_SAMPLES and stacks them with a length mask;
the clips here are synthesised in code (a tone pattern per command plus line noise) and written
through `wave` exactly as the device writes them.

    python wavlm_intercom_commands.py --epochs 2
"""
import argparse
import io
import logging
import math
import wave

import numpy as np
import torch
from transformers import WavLMConfig, WavLMForSequenceClassification

log = logging.getLogger("intercom-commands")

RATE = 8000
CLIP_SAMPLES = 4000
COMMANDS = {"open": (440.0, 660.0), "call": (330.0, 330.0), "cancel": (550.0, 275.0)}

ENCODER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               conv_dim=(16, 16, 16), conv_stride=(5, 4, 2), conv_kernel=(10, 8, 4),
               num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, classifier_proj_size=16,
               num_buckets=16, max_bucket_distance=64, mask_time_prob=0.0)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--clips-per-command", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=6)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=21)
    return p.parse_args()


def synth_wav(command, rng):
    f0, f1 = COMMANDS[command]
    n = int(rng.integers(2400, 4800))
    t = np.arange(n) / RATE
    freq = np.linspace(f0, f1, n)
    signal = 0.5 * np.sin(2 * math.pi * freq * t) + 0.05 * rng.standard_normal(n)
    pcm = (np.clip(signal, -1, 1) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def read_wav(blob):
    with wave.open(io.BytesIO(blob), "rb") as w:
        assert w.getframerate() == RATE and w.getsampwidth() == 2
        frames = w.readframes(w.getnframes())
    return torch.from_numpy(np.frombuffer(frames, dtype="<i2").copy())


def to_batch(clips):
    waves = torch.zeros(len(clips), CLIP_SAMPLES, dtype=clips[0].dtype)
    mask = torch.zeros(len(clips), CLIP_SAMPLES, dtype=torch.long)
    for i, clip in enumerate(clips):
        clip = clip[:CLIP_SAMPLES]
        waves[i, :len(clip)] = clip
        mask[i, :len(clip)] = 1
    return waves, mask


def make_dataset(per_command, seed):
    rng = np.random.default_rng(seed)
    labels = list(COMMANDS)
    rows = [(synth_wav(cmd, rng), labels.index(cmd)) for cmd in labels for _ in range(per_command)]
    order = rng.permutation(len(rows))
    return [rows[i] for i in order]


def iterate(rows, batch_size):
    for i in range(0, len(rows), batch_size):
        chunk = rows[i:i + batch_size]
        waves, mask = to_batch([read_wav(blob) for blob, _ in chunk])
        yield waves, mask, torch.tensor([y for _, y in chunk])


def evaluate(model, rows, batch_size):
    model.eval()
    correct = 0
    with torch.no_grad():
        for waves, mask, labels in iterate(rows, batch_size):
            correct += (model(input_values=waves, attention_mask=mask).logits.argmax(-1) == labels).sum().item()
    model.train()
    return correct / len(rows)


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(args.seed)
    train = make_dataset(args.clips_per_command, args.seed)
    dev = make_dataset(2, args.seed + 1)
    labels = list(COMMANDS)
    config = WavLMConfig(num_labels=len(labels), id2label=dict(enumerate(labels)),
                         label2id={l: i for i, l in enumerate(labels)}, **ENCODER)
    model = WavLMForSequenceClassification(config)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    log.info("%d training clips, %d dev clips, %d parameters", len(train), len(dev),
             sum(p.numel() for p in model.parameters()))
    for epoch in range(args.epochs):
        total = 0.0
        for step, (waves, mask, y) in enumerate(iterate(train, args.batch_size)):
            out = model(input_values=waves, attention_mask=mask, labels=y)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            total += out.loss.item()
            log.info("epoch %d step %d loss %.4f", epoch, step, out.loss.item())
        log.info("epoch %d mean loss %.4f dev acc %.3f", epoch, total / (step + 1), evaluate(model, dev, args.batch_size))


if __name__ == "__main__":
    main()
