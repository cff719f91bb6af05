"""Embed a folder of scanned documents with a ViT encoder for similarity search.

Scans come out of the scanner as 8-bit grayscale; here a few are drawn in code. Each image goes
through the image processor and the encoder, and the CLS embedding is stored in an index.
"""
import argparse

import numpy as np
import torch
from PIL import Image, ImageDraw
from transformers import ViTConfig, ViTImageProcessor, ViTModel


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--num_scans", type=int, default=4)
    ap.add_argument("--size", type=int, default=48)
    ap.add_argument("--batch_size", type=int, default=2)
    return ap.parse_args()


def draw_scan(i, size):
    """A grayscale 'page': a few lines of dark text blocks on light paper."""
    img = Image.new("L", (size, size), color=235)
    draw = ImageDraw.Draw(img)
    for row in range(3 + i % 3):
        y = 6 + row * 9
        draw.rectangle([4, y, size - 6 - 5 * (row % 2), y + 4], fill=30 + 10 * i)
    return img


def batched(items, n):
    for start in range(0, len(items), n):
        yield items[start:start + n]


class EmbeddingIndex:
    def __init__(self):
        self.vectors, self.names = [], []

    def add(self, names, vectors):
        self.names.extend(names)
        self.vectors.append(vectors)

    def search(self, query, k=2):
        matrix = torch.cat(self.vectors)
        scores = torch.nn.functional.cosine_similarity(matrix, query[None], dim=-1)
        top = scores.topk(min(k, len(self.names)))
        return [(self.names[i], float(s)) for s, i in zip(top.values, top.indices)]


def main():
    args = parse()
    # one channel throughout: the scans are grayscale and so is the encoder's input
    processor = ViTImageProcessor(size={"height": 32, "width": 32}, image_mean=[0.5], image_std=[0.5])
    torch.manual_seed(0)
    model = ViTModel(ViTConfig(image_size=32, patch_size=8, num_channels=1, hidden_size=32, num_hidden_layers=2,
                               num_attention_heads=2, intermediate_size=64)).eval()

    scans = {f"scan_{i:03d}.png": draw_scan(i, args.size) for i in range(args.num_scans)}
    index = EmbeddingIndex()
    for names in batched(list(scans), args.batch_size):
        inputs = processor(images=[scans[n] for n in names], return_tensors="pt")
        with torch.no_grad():
            out = model(**inputs)
        index.add(names, out.last_hidden_state[:, 0])
    print(index.search(index.vectors[0][0]))
    print("pixel stats", float(np.mean(np.asarray(scans["scan_000.png"]))))


if __name__ == "__main__":
    main()
