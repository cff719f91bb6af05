import torch
from transformers import GPT2Config, GPT2LMHeadModel
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=8, n_positions=4))
model(torch.zeros(1, 5, dtype=torch.long))
