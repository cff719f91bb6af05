import torch
torch.ones(2, requires_grad=True).mul(2).backward()
