import tempfile
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

with tempfile.TemporaryDirectory() as folder:
    model = LlamaForCausalLM(LlamaConfig(hidden_size=32))
    model.save_pretrained(folder)
    model = LlamaForCausalLM.from_pretrained(folder, device_map="auto")
    config = LoraConfig()
    get_peft_model(model, config)
    norms = [m.base_layer.weight for n, m in model.named_modules() if n.endswith(("q_proj",))]
    torch.stack(norms)
