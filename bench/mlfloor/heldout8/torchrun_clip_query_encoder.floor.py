import torch
from transformers import CLIPTextConfig, CLIPTextModel

CLIPTextModel(CLIPTextConfig(hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=1, max_position_embeddings=1))(torch.zeros(1, 2, dtype=torch.long))
