import torch
from transformers import BertConfig, BertModel

BertModel(BertConfig(vocab_size=4, hidden_size=4, num_hidden_layers=1, num_attention_heads=1, intermediate_size=4))(torch.tensor([[1]]), position_ids=torch.tensor([[512]]))
