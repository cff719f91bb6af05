import torch
from transformers import DebertaV2Config, DebertaV2ForMultipleChoice

DebertaV2ForMultipleChoice(DebertaV2Config(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8))(torch.ones(2, 2, 2, dtype=torch.long).transpose(0, 1))
