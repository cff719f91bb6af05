import torch
from transformers import ReformerConfig, ReformerModel

ReformerModel(ReformerConfig(hidden_size=8, attention_head_size=4, num_attention_heads=2, feed_forward_size=8, attn_layers=["local"], local_attn_chunk_length=2, axial_pos_embds=False))(torch.ones(1, 3, dtype=torch.long))
