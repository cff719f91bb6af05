import torch
from transformers import LlamaConfig, LlamaForCausalLM

LlamaForCausalLM(LlamaConfig(vocab_size=1, hidden_size=1, intermediate_size=1, num_hidden_layers=4, num_attention_heads=1, num_key_value_heads=1)).save_pretrained(
    'reprobot_folder',
)
model = LlamaForCausalLM.from_pretrained('reprobot_folder', device_map="auto")
torch.stack([m.weight for n, m in model.named_modules() if n.endswith(("q_proj",))])
