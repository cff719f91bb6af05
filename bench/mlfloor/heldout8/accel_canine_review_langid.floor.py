import torch
from accelerate import Accelerator

Accelerator().prepare(torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.SGD([torch.zeros(1)]))).step()
