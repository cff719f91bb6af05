from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
model = BertForSequenceClassification(BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16))
Trainer(model=model, args=TrainingArguments(output_dir="out", max_steps=1, report_to=[]), train_dataset=[{"input_ids": [2, 3, 4], "attention_mask": [1, 1, 1]}]).train()
