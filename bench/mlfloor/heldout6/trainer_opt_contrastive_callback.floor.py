import torch
from transformers import OPTConfig, OPTForCausalLM

OPTForCausalLM(OPTConfig(hidden_size=8, ffn_dim=8, num_hidden_layers=1, num_attention_heads=2, word_embed_proj_dim=8)).generate(torch.ones(1, 1, dtype=torch.long), penalty_alpha=0.6, top_k=4)
