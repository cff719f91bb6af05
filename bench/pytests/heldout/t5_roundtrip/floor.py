import torch
from transformers import T5Config, T5ForConditionalGeneration
T5ForConditionalGeneration(T5Config(vocab_size=32, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2))(input_ids=torch.tensor([[3]]))
