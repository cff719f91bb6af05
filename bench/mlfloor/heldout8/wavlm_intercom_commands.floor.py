import torch
from transformers import WavLMConfig, WavLMModel

WavLMModel(WavLMConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8, conv_dim=(8,), conv_stride=(1,), conv_kernel=(1,), num_conv_pos_embeddings=2, num_conv_pos_embedding_groups=1))(torch.zeros(1, 1, dtype=torch.int16))
