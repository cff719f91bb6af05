import torch
from transformers import AutoModelForSeq2SeqLM


def encode(words):
    return torch.tensor([[3 + len(w) % 20 for w in words] + [1]])


def test_reloaded_forward(t5_dir):
    model = AutoModelForSeq2SeqLM.from_pretrained(t5_dir)
    input_ids = encode("translate this please".split())
    out = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
    assert out.logits.shape[-1] == 32
