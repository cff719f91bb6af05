from transformers import BertConfig, BertModel

BertModel(BertConfig(hidden_size=10, num_attention_heads=4))
