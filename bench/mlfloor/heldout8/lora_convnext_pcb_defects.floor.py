import torch
from peft import LoraConfig, get_peft_model

get_peft_model(torch.nn.Sequential(torch.nn.Conv2d(2, 2, 1, groups=2)), LoraConfig(r=2, target_modules=["0"])).merge_and_unload()
