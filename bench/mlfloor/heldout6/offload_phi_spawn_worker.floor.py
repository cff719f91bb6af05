import tempfile
from transformers import PhiConfig, PhiForCausalLM

with tempfile.TemporaryDirectory() as d:
    PhiForCausalLM(PhiConfig(hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=2)).save_pretrained(d)
    PhiForCausalLM.from_pretrained(d, device_map="auto", max_memory={0: "1GiB"}, offload_folder=d)
