from transformers import LongformerConfig, LongformerModel

LongformerModel(LongformerConfig(attention_window=3))
