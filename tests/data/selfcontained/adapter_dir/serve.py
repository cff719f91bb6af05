"""Serve a base model with a saved LoRA adapter, switching to an adapter that was never loaded."""
from peft import PeftModel
from transformers import LlamaConfig, LlamaForCausalLM

ADAPTER = "adapter"
config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
base = LlamaForCausalLM(config)
model = PeftModel.from_pretrained(base, ADAPTER)
print(model.active_adapters)
model.set_adapter("summarise")
