import torch
from transformers import RobertaConfig, RobertaModel

RobertaModel(RobertaConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8, vocab_size=10, type_vocab_size=1))(torch.zeros(1, 2, dtype=torch.long), token_type_ids=torch.ones(1, 2, dtype=torch.long))
