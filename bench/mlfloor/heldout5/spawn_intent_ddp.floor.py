import torch
from transformers import DistilBertConfig, DistilBertForSequenceClassification

DistilBertForSequenceClassification(DistilBertConfig(dim=8, n_layers=1, n_heads=2, hidden_dim=16, num_labels=3))(input_ids=torch.ones(1, 2, dtype=torch.long), labels=torch.tensor([1.0]))
