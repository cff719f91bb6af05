import torch
from transformers import T5Config, T5ForConditionalGeneration

T5ForConditionalGeneration(T5Config(d_model=8, d_ff=16, d_kv=4, num_layers=1, num_heads=2, decoder_start_token_id=0)).generate(torch.ones(1, 1, dtype=torch.long), do_sample=True, temperature=0.0)
