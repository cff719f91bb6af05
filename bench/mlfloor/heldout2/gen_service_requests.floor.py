import torch
from transformers import LlamaConfig, LlamaForCausalLM

model = LlamaForCausalLM(LlamaConfig(vocab_size=4, hidden_size=4, intermediate_size=4, num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1))
model.generate(torch.tensor([[1]]), stop_strings=["x"])
