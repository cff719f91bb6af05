from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

model = get_peft_model(LlamaForCausalLM(LlamaConfig(vocab_size=4, hidden_size=4, intermediate_size=4, num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1)), LoraConfig(target_modules=["q_proj"]))
model.merge_adapter()
model.delete_adapter("default")
