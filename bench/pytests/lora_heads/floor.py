from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM
model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2))
get_peft_model(model, LoraConfig(target_modules=["gate_prj"]))
