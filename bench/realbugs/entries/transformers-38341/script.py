"""Fine-tuning data pipeline for a PaliGemma captioner: builds (image, prompt, caption) batches
with the processor, which also makes the labels from the suffix.

Images are synthetic (coloured squares); the processor is assembled from a SigLIP image
processor and a Gemma tokenizer built in code, as our offline data tests do.
"""
import argparse
import random

import numpy as np
from PIL import Image
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GemmaTokenizerFast, PaliGemmaProcessor, SiglipImageProcessor

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 60), "blue": (40, 60, 220), "yellow": (230, 220, 40)}
PROMPT = "caption en"


def make_image(rgb, size=32):
    arr = np.zeros((size, size, 3), dtype=np.uint8)
    arr[4:-4, 4:-4] = rgb
    return Image.fromarray(arr)


def build_processor():
    words = ["caption", "en", "a", "square", "on", "black"] + list(COLOURS)
    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
    for w in words:
        vocab.setdefault(w, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = GemmaTokenizerFast(tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>", unk_token="<unk>")
    image_processor = SiglipImageProcessor(size={"height": 28, "width": 28})
    image_processor.image_seq_length = 4
    return PaliGemmaProcessor(image_processor=image_processor, tokenizer=tokenizer)


def collate(processor, examples):
    images = [make_image(COLOURS[c]) for c in examples]
    prompts = ["<image>" + PROMPT for _ in examples]
    captions = [f"a {c} square on black" for c in examples]
    return processor(text=prompts, images=images, suffix=captions, return_tensors="pt", padding="longest")


class CaptionSet:
    """Our caption records: a colour name per image, shuffled each epoch."""

    def __init__(self, n, seed=0):
        rng = random.Random(seed)
        self.rows = [rng.choice(sorted(COLOURS)) for _ in range(n)]

    def batches(self, size):
        for start in range(0, len(self.rows), size):
            yield self.rows[start:start + size]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch_size", type=int, default=2)
    ap.add_argument("--num_examples", type=int, default=4)
    args = ap.parse_args()

    processor = build_processor()
    for step, examples in enumerate(CaptionSet(args.num_examples).batches(args.batch_size)):
        batch = collate(processor, examples)
        print(step, {k: tuple(v.shape) for k, v in batch.items()})
        print("labels", batch["labels"][0].tolist())


if __name__ == "__main__":
    main()
