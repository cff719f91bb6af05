"""Fine-tune a small Gemma 3 vision-language model to caption synthetic chart thumbnails.

Prompt-completion SFT with TRL: the prompt holds the image placeholder, the completion is the
caption. A tiny Gemma3ForConditionalGeneration (SigLIP tower + Gemma 3 text stack) is built from
configs and the processor from a word-level tokenizer written here, so the run is offline.
"""
import argparse
import logging
import random

import numpy as np
from PIL import Image
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessor, Gemma3Processor,
                          PreTrainedTokenizerFast)
from trl import SFTConfig, SFTTrainer

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("chart-captions")

CFG = {"image_size": 32, "patch_size": 8, "tokens_per_image": 4, "hidden": 32, "layers": 2, "heads": 2}
SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_image>", "<end_of_image>", "<image_soft_token>"]
SHAPES = {"bar": 0, "line": 1, "pie": 2}
COLOURS = {"red": (200, 40, 40), "green": (40, 160, 60), "blue": (40, 70, 200)}
WORDS = ["a", "chart", "in", "describe", "this", "plot", "showing", "values"] + list(SHAPES) + list(COLOURS)


def build_processor(cfg):
    vocab = {tok: i for i, tok in enumerate(SPECIAL + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>",
        extra_special_tokens={"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                              "image_token": "<image_soft_token>"},
        model_input_names=["input_ids", "attention_mask"])
    image_processor = Gemma3ImageProcessor(size={"height": cfg["image_size"], "width": cfg["image_size"]},
                                           do_pan_and_scan=False)
    return Gemma3Processor(image_processor=image_processor, tokenizer=tokenizer,
                           image_seq_length=cfg["tokens_per_image"])


def build_model(processor, cfg):
    tok = processor.tokenizer
    config = Gemma3Config(
        text_config={"vocab_size": len(tok), "hidden_size": cfg["hidden"], "intermediate_size": 64,
                     "num_hidden_layers": cfg["layers"], "num_attention_heads": cfg["heads"],
                     "num_key_value_heads": 1, "head_dim": 16, "sliding_window": 16,
                     "max_position_embeddings": 128},
        vision_config={"image_size": cfg["image_size"], "patch_size": cfg["patch_size"], "hidden_size": 32,
                       "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2},
        mm_tokens_per_image=cfg["tokens_per_image"], image_token_index=processor.image_token_id,
        boi_token_index=tok.convert_tokens_to_ids("<start_of_image>"),
        eoi_token_index=tok.convert_tokens_to_ids("<end_of_image>"),
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    return Gemma3ForConditionalGeneration(config)


def draw_chart(kind, colour, rng, size):
    canvas = np.full((size, size, 3), 245, dtype=np.uint8)
    rgb = COLOURS[colour]
    if kind == "bar":
        for x in range(2, size - 2, 6):
            canvas[size - rng.randint(6, size - 2):, x:x + 4] = rgb
    elif kind == "line":
        ys = [rng.randint(4, size - 4) for _ in range(size)]
        for x, y in enumerate(ys):
            canvas[y - 1:y + 1, x] = rgb
    else:
        yy, xx = np.mgrid[:size, :size]
        canvas[(yy - size / 2) ** 2 + (xx - size / 2) ** 2 < (size / 3) ** 2] = rgb
    return Image.fromarray(canvas)


def make_dataset(n, rng, size, boi_token):
    rows = []
    for _ in range(n):
        kind, colour = rng.choice(list(SHAPES)), rng.choice(list(COLOURS))
        rows.append({"images": [draw_chart(kind, colour, rng, size)],
                     "prompt": f"{boi_token} describe this plot",
                     "completion": f" a {colour} {kind} chart showing values"})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=12)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--output_dir", default="chart-captioner")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    processor = build_processor(CFG)
    model = build_model(processor, CFG)
    train_rows = make_dataset(args.examples, rng, CFG["image_size"], processor.boi_token)
    log.info("built %d examples; vocab %d", len(train_rows), len(processor.tokenizer))

    sft_args = SFTConfig(output_dir=args.output_dir, max_steps=args.steps, per_device_train_batch_size=4,
                         learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to=[],
                         use_cpu=True, bf16=False, fp16=False, max_length=None, seed=args.seed)
    trainer = SFTTrainer(model=model, args=sft_args, train_dataset=train_rows, processing_class=processor)
    trainer.train()
    log.info("final loss %.4f", trainer.state.log_history[-1].get("train_loss", float("nan")))


if __name__ == "__main__":
    main()
