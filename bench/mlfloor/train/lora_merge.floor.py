import torch
from peft import LoraConfig, get_peft_model
model = get_peft_model(torch.nn.Sequential(torch.nn.Linear(2, 2)), LoraConfig(target_modules=["0"], init_lora_weights=False))
torch.nn.init.constant_(model.base_model.model[0].lora_A.default.weight, float("nan"))
model.merge_and_unload(safe_merge=True)
