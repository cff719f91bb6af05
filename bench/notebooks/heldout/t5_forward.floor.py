import torch
from transformers import T5Config, T5ForConditionalGeneration
model = T5ForConditionalGeneration(T5Config(vocab_size=8, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2))
model(input_ids=torch.zeros(1, 2, dtype=torch.long))
