"""PCB defect classifier: LoRA on a small ConvNeXt, then merged into plain weights for the line camera.

The inspection camera runs a plain ConvNeXt (no PEFT at runtime), so the adapter is trained on the
depthwise and pointwise convolutions of every block (those moved the validation accuracy most in
the last sweep), the head is trained in full, and the result is merged with merge_and_unload()
before export. Images are rendered in code: a clean board, a scratch, or a solder bridge.

    python lora_convnext_pcb_defects.py --epochs 3 --rank 16
"""
import argparse
import logging
import os
import shutil
import tempfile

import torch
from peft import LoraConfig, get_peft_model
from transformers import ConvNextConfig, ConvNextForImageClassification

log = logging.getLogger("pcb-defects")

CLASSES = ["ok", "scratch", "bridge"]

BACKBONE = dict(num_channels=3, patch_size=2, num_stages=2, hidden_sizes=[8, 16], depths=[1, 1],
                image_size=32, drop_path_rate=0.0)

ADAPTER = dict(target_modules=["dwconv", "pwconv1", "pwconv2"], modules_to_save=["classifier"],
               lora_dropout=0.0, bias="none")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--per-class", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=4)
    return p.parse_args()


def render_board(kind, gen):
    img = 0.2 + 0.05 * torch.randn(3, 32, 32, generator=gen)
    img[1, ::4, :] += 0.4  # copper traces
    if kind == "scratch":
        row = int(torch.randint(4, 28, (1,), generator=gen))
        for c in range(32):
            img[:, min(31, row + c // 8), c] = 0.9
    elif kind == "bridge":
        r, c = (int(v) for v in torch.randint(6, 26, (2,), generator=gen))
        img[:, r - 2:r + 2, c - 1:c + 1] = 1.0
    return img.clamp(0, 1)


def make_split(per_class, seed):
    gen = torch.Generator().manual_seed(seed)
    images, labels = [], []
    for label, kind in enumerate(CLASSES):
        for _ in range(per_class):
            images.append(render_board(kind, gen))
            labels.append(label)
    mean = torch.tensor([0.3, 0.4, 0.3]).view(3, 1, 1)
    return (torch.stack(images) - mean) / 0.25, torch.tensor(labels)


def batches(x, y, size, gen):
    order = torch.randperm(len(y), generator=gen)
    for i in range(0, len(y), size):
        idx = order[i:i + size]
        yield x[idx], y[idx]


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        preds = model(pixel_values=x).logits.argmax(-1)
    model.train()
    return (preds == y).float().mean().item()


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(args.seed)
    train_x, train_y = make_split(args.per_class, args.seed)
    val_x, val_y = make_split(args.per_class // 2, args.seed + 1)
    config = ConvNextConfig(num_labels=len(CLASSES), id2label=dict(enumerate(CLASSES)),
                            label2id={c: i for i, c in enumerate(CLASSES)}, **BACKBONE)
    base = ConvNextForImageClassification(config)
    lora = LoraConfig(r=args.rank, lora_alpha=args.alpha, **ADAPTER)
    model = get_peft_model(base, lora)
    model.print_trainable_parameters()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    for epoch in range(args.epochs):
        total = 0.0
        for xb, yb in batches(train_x, train_y, args.batch_size, gen):
            loss = model(pixel_values=xb, labels=yb).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            total += loss.item()
        log.info("epoch %d loss %.4f val acc %.3f", epoch, total, accuracy(model, val_x, val_y))
    export_dir = tempfile.mkdtemp(prefix="pcb-export-")
    try:
        model.save_pretrained(os.path.join(export_dir, "adapter"))
        merged = model.merge_and_unload()
        merged.save_pretrained(os.path.join(export_dir, "merged"))
        log.info("merged model val acc %.3f, exported to %s", accuracy(merged, val_x, val_y), export_dir)
    finally:
        shutil.rmtree(export_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
