"""P-tuning a small BERT for topic classification of short news headlines.

Headlines are generated in code from templates; the model is a tiny BERT built from a config and the
tokenizer a word-level fast tokenizer built from the headlines.
"""
import argparse
import random

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast
from peft import PromptEncoderConfig, get_peft_model

TOPICS = {
    "sports": ["{team} wins the final", "{team} signs a new coach", "injury worries for {team}"],
    "business": ["{firm} shares fall sharply", "{firm} reports record profit", "{firm} plans new factory"],
    "science": ["new telescope images {thing}", "researchers map {thing}", "study explains {thing}"],
}
FILL = {"team": ["rovers", "united", "city"], "firm": ["acme", "globex", "initech"],
        "thing": ["distant galaxies", "ocean currents", "bird migration"]}


def headline(rng, topic):
    template = rng.choice(TOPICS[topic])
    for key, options in FILL.items():
        template = template.replace("{" + key + "}", rng.choice(options))
    return template


def build_tokenizer():
    words = set()
    for templates in TOPICS.values():
        for t in templates:
            words.update(w for w in t.split() if not w.startswith("{"))
    for options in FILL.values():
        for o in options:
            words.update(o.split())
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    vocab.update({w: i + 4 for i, w in enumerate(sorted(words))})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


def batches(tokenizer, n, batch_size, seed):
    rng = random.Random(seed)
    topics = sorted(TOPICS)
    rows = [(headline(rng, t), topics.index(t)) for t in (rng.choice(topics) for _ in range(n))]
    for i in range(0, n, batch_size):
        chunk = rows[i:i + batch_size]
        enc = tokenizer([r[0] for r in chunk], padding=True, return_tensors="pt")
        enc["labels"] = torch.tensor([r[1] for r in chunk])
        yield enc


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_virtual_tokens", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    tokenizer = build_tokenizer()
    base_model = BertForSequenceClassification(BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, num_labels=len(TOPICS)))

    ptuning_config = PromptEncoderConfig(task_type="SEQ_CLS", num_virtual_tokens=args.num_virtual_tokens)
    model = get_peft_model(base_model, ptuning_config)
    model.print_trainable_parameters()

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    for epoch in range(args.epochs):
        for batch in batches(tokenizer, 48, 8, epoch):
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
