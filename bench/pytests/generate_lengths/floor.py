import torch
from transformers import GPT2Config, GPT2LMHeadModel
GPT2LMHeadModel(GPT2Config(vocab_size=16, n_positions=8, n_embd=8, n_layer=1, n_head=2)).generate(torch.tensor([[2, 3, 4]]), max_new_tokens=16, min_new_tokens=16)
