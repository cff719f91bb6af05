from transformers import LlamaConfig, LlamaForCausalLM
LlamaForCausalLM(LlamaConfig(hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=2, attn_implementation="flash_attention_2"))
