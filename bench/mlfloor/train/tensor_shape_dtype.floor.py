import torch
from transformers import LlamaConfig, LlamaForCausalLM
model = LlamaForCausalLM(LlamaConfig(hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=1, vocab_size=8)).to(torch.bfloat16)
model(inputs_embeds=torch.ones(1, 1, 8))
