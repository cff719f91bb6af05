from transformers import BertConfig, BertModel
BertModel(BertConfig(vocab_size=16, pad_token_id=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16))
