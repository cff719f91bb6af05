import torch
from transformers import BertConfig, EncoderDecoderConfig, EncoderDecoderModel

EncoderDecoderModel(EncoderDecoderConfig.from_encoder_decoder_configs(BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8, vocab_size=10), BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8, vocab_size=10))).generate(torch.ones(1, 2, dtype=torch.long))
