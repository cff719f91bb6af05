import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

Qwen2ForCausalLM(Qwen2Config(vocab_size=8, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1))(input_ids=torch.ones(1, 2, dtype=torch.long), labels=torch.tensor([[1, -1]]))
