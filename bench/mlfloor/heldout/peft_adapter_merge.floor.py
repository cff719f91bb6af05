from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

model = get_peft_model(LlamaForCausalLM(LlamaConfig(vocab_size=4, hidden_size=4, intermediate_size=4, num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1)), LoraConfig(r=1, target_modules=["q_proj"]))
model.add_adapter("b", LoraConfig(r=2, target_modules=["q_proj"]))
model.add_weighted_adapter(["default", "b"], [1, 1], "m", combination_type="linear")
