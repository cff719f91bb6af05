import pytest


def batch(tokenizer, texts):
    return tokenizer(texts, padding=True, return_tensors="pt")


def test_right_padding(tokenizer):
    enc = batch(tokenizer, ["the cat sat", "the cat"])
    assert enc["input_ids"][1, -1].item() == tokenizer.pad_token_id


def test_padding_side_from_settings(tokenizer, monkeypatch):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setattr(tokenizer, "padding_side", "middle")
    enc = batch(tokenizer, ["the cat sat on the mat", "the cat"])
    assert enc["attention_mask"].sum().item() == 8
