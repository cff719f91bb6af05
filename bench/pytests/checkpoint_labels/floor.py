from transformers import BertConfig, BertForSequenceClassification
BertForSequenceClassification(BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)).save_pretrained("classifier")
BertForSequenceClassification.from_pretrained("classifier", num_labels=3)
