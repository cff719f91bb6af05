import torch
from transformers import GPT2Config, GPT2Model

GPT2Model(GPT2Config(vocab_size=4, n_embd=4, n_layer=1, n_head=1))(torch.zeros(1, 1, dtype=torch.float64))
