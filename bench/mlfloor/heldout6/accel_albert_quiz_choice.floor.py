import torch
from transformers import AlbertConfig, AlbertForMultipleChoice

AlbertForMultipleChoice(AlbertConfig(embedding_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8))(torch.ones(2, 3, dtype=torch.long))
