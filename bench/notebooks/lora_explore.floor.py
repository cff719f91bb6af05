from transformers import GPT2Config, GPT2LMHeadModel
from peft import LoraConfig, get_peft_model
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=8))
get_peft_model(model, LoraConfig(target_modules=["q_proj", "v_proj"]))
