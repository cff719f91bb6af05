import torch
from transformers import GPT2Config, GPT2LMHeadModel
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=1, vocab_size=8))
model.generate(torch.tensor([[1]]), do_sample=False, num_return_sequences=2)
