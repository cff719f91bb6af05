import torch
from transformers import GPT2Config, GPT2LMHeadModel
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=1, vocab_size=16))
model(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, -1]]))
