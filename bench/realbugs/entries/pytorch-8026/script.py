"""Intent classification of short commands with a GRU encoder over packed sequences.

Commands of different lengths are padded per batch; the encoder packs them so the GRU skips the
padding, and the last hidden state of each command feeds a linear classifier. The commands and
their intents are written in code; the vocabulary is built from them.
"""
import argparse
import logging

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.data import DataLoader, Dataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("intents")

COMMANDS = [
    ("turn on the lights", "lights"),
    ("please switch off all the lights in the kitchen", "lights"),
    ("dim the lights", "lights"),
    ("play some jazz", "music"),
    ("play the next song on my evening playlist please", "music"),
    ("stop the music", "music"),
    ("what is the weather like tomorrow morning", "weather"),
    ("will it rain", "weather"),
    ("how cold is it outside right now", "weather"),
    ("set an alarm for seven", "alarm"),
    ("wake me up at six thirty tomorrow", "alarm"),
    ("cancel my alarm", "alarm"),
]
PAD, UNK = "<pad>", "<unk>"


def parse_args():
    ap = argparse.ArgumentParser(description="GRU intent classifier")
    ap.add_argument("--embed_dim", type=int, default=16)
    ap.add_argument("--hidden_dim", type=int, default=32)
    ap.add_argument("--batch_size", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


class Vocab:
    def __init__(self, sentences):
        self.itos = [PAD, UNK]
        for sentence in sentences:
            for word in sentence.split():
                if word not in self.itos:
                    self.itos.append(word)
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def encode(self, sentence):
        return [self.stoi.get(w, self.stoi[UNK]) for w in sentence.split()]


class CommandDataset(Dataset):
    def __init__(self, pairs, vocab, labels):
        self.items = [(torch.tensor(vocab.encode(text)), labels.index(intent)) for text, intent in pairs]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def collate(batch):
    """Pad the commands of a batch to the longest one; keep each command's true length."""
    lengths = torch.tensor([len(ids) for ids, _ in batch])
    padded = torch.zeros(len(batch), int(lengths.max()), dtype=torch.long)
    for row, (ids, _) in enumerate(batch):
        padded[row, : len(ids)] = ids
    targets = torch.tensor([label for _, label in batch])
    return padded, lengths, targets


class Encoder(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_dim, num_classes):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.gru = nn.GRU(embed_dim, hidden_dim, batch_first=True)
        self.classifier = nn.Linear(hidden_dim, num_classes)

    def forward(self, padded, lengths):
        embedded = self.embedding(padded)
        packed = pack_padded_sequence(embedded, lengths, batch_first=True)
        outputs, hidden = self.gru(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True)
        return self.classifier(hidden[-1])


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for padded, lengths, targets in loader:
            preds = model(padded, lengths).argmax(dim=-1)
            correct += int((preds == targets).sum())
            total += len(targets)
    return correct / total


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    labels = sorted({intent for _, intent in COMMANDS})
    vocab = Vocab(text for text, _ in COMMANDS)
    dataset = CommandDataset(COMMANDS, vocab, labels)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=False, collate_fn=collate)
    log.info("vocabulary: %d words, %d intents, %d commands", len(vocab.itos), len(labels), len(dataset))

    model = Encoder(len(vocab.itos), args.embed_dim, args.hidden_dim, len(labels))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        model.train()
        running = 0.0
        for padded, lengths, targets in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(padded, lengths), targets)
            loss.backward()
            optimizer.step()
            running += loss.item()
        log.info("epoch %d: loss %.3f accuracy %.2f", epoch, running / len(loader), evaluate(model, loader))


if __name__ == "__main__":
    main()
