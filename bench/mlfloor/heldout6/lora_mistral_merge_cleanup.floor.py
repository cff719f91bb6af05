from peft import LoraConfig, get_peft_model
from transformers import MistralConfig, MistralForCausalLM

get_peft_model(MistralForCausalLM(MistralConfig(hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)), LoraConfig(target_modules=["q_proj"])).merge_and_unload().delete_adapter("default")
