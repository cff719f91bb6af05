"""Loss of a saved checkpoint on a batch whose labels were cut to the wrong length."""
import logging
import torch
from transformers import AutoModelForCausalLM

logging.basicConfig(level=logging.INFO)
CHECKPOINT = "tiny-llama"


def load(path):
    model = AutoModelForCausalLM.from_pretrained(path)
    model.train()
    return model


def batch():
    ids = torch.tensor([[1, 2, 3, 4]])
    return {"input_ids": ids, "labels": ids[:, :2]}


model = load(CHECKPOINT)
logging.info("loaded %d parameters", sum(p.numel() for p in model.parameters()))
out = model(**batch())
print(out.loss.item())
