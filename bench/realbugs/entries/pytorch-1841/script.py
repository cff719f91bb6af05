"""Word-image OCR with a small CRNN (conv feature extractor + bidirectional GRU + CTC loss).

Each sample is a grey-scale word image 32 pixels high whose width grows with the number of
characters, paired with the character indices of the word. The images are rendered in code from
per-character glyph patterns with a little noise, so no image files are needed.
"""
import argparse
import logging
import string

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("crnn")

ALPHABET = string.ascii_lowercase
WORDS = ["to", "invoice", "of", "payment", "due", "receipt", "net", "amount", "tax", "balance",
         "paid", "total", "vendor", "date", "account", "id", "fee", "credit", "order", "ship"]
HEIGHT, CHAR_WIDTH = 32, 12


def parse_args():
    ap = argparse.ArgumentParser(description="train a CRNN on rendered word images")
    ap.add_argument("--batch_size", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--copies", type=int, default=2, help="noisy renderings per word")
    ap.add_argument("--seed", type=int, default=7)
    return ap.parse_args()


def glyph(char, generator):
    """A fixed 32x12 pattern per character (seeded by its index) plus a little noise."""
    pattern = torch.Generator().manual_seed(ALPHABET.index(char) + 1)
    base = (torch.rand(HEIGHT, CHAR_WIDTH, generator=pattern) > 0.6).float()
    return (base + 0.1 * torch.randn(HEIGHT, CHAR_WIDTH, generator=generator)).clamp(0, 1)


class WordImagesDataset(Dataset):
    def __init__(self, words, copies, seed):
        generator = torch.Generator().manual_seed(seed)
        self.samples = []
        for _ in range(copies):
            for word in words:
                image = torch.cat([glyph(c, generator) for c in word], dim=1)   # 32 x (12 * len)
                target = torch.tensor([ALPHABET.index(c) + 1 for c in word])    # 0 is the CTC blank
                self.samples.append((image.unsqueeze(0), target))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        return self.samples[idx]


class CRNN(nn.Module):
    def __init__(self, hidden, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d((2, 1)),
        )
        self.rnn = nn.GRU(32 * (HEIGHT // 4), hidden, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, num_classes)

    def forward(self, images):
        maps = self.features(images)                       # B x C x H/4 x W/2
        b, c, h, w = maps.shape
        seq = maps.permute(0, 3, 1, 2).reshape(b, w, c * h)
        out, _ = self.rnn(seq)
        return self.head(out).log_softmax(-1)              # B x T x classes


def greedy_decode(log_probs):
    words = []
    for row in log_probs.argmax(-1):
        chars, prev = [], 0
        for idx in row.tolist():
            if idx != prev and idx != 0:
                chars.append(ALPHABET[idx - 1])
            prev = idx
        words.append("".join(chars))
    return words


def train_epoch(model, loader, optimizer, ctc):
    model.train()
    total = 0.0
    for images, targets in loader:
        log_probs = model(images)
        input_lengths = torch.full((images.size(0),), log_probs.size(1), dtype=torch.long)
        target_lengths = torch.tensor([len(t) for t in targets])
        loss = ctc(log_probs.transpose(0, 1), targets, input_lengths, target_lengths)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    dataset = WordImagesDataset(WORDS, args.copies, args.seed)
    for image, target in list(dataset)[:5]:
        log.info("target %s image %s", tuple(target.shape), tuple(image.shape))
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(args.seed))

    model = CRNN(args.hidden, len(ALPHABET) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    for epoch in range(args.epochs):
        loss = train_epoch(model, loader, optimizer, ctc)
        log.info("epoch %d: ctc loss %.3f", epoch, loss)
    model.eval()
    with torch.no_grad():
        sample = dataset[0][0].unsqueeze(0)
        log.info("decoded first word: %s", greedy_decode(model(sample))[0])


if __name__ == "__main__":
    main()
