from peft import LoraConfig, get_peft_model
from transformers import OPTConfig, OPTForCausalLM

model = get_peft_model(OPTForCausalLM(OPTConfig(hidden_size=8, ffn_dim=8, num_hidden_layers=1, num_attention_heads=2, word_embed_proj_dim=8, vocab_size=10)), LoraConfig(r=8))
model.add_adapter("b", LoraConfig(r=4))
model.add_weighted_adapter(["default", "b"], [1, 1], "c", combination_type="linear")
