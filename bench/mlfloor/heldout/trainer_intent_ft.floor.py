import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

model = BertForSequenceClassification(BertConfig(vocab_size=4, hidden_size=4, num_hidden_layers=1, num_attention_heads=1, intermediate_size=4))
Trainer(model=model, args=TrainingArguments("out"), train_dataset=[{"input_ids": torch.tensor([1]), "attention_mask": torch.tensor([1])}]).train()
