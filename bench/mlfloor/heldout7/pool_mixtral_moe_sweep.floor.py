from transformers import MixtralConfig, MixtralForCausalLM

MixtralForCausalLM(MixtralConfig(hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, num_local_experts=1, num_experts_per_tok=2)).generate()
