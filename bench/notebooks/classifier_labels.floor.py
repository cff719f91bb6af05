import torch
from transformers import BertConfig, BertForSequenceClassification
model = BertForSequenceClassification(BertConfig(vocab_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8, num_labels=3))
model(torch.zeros(1, 2, dtype=torch.long), labels=torch.tensor([3]))
