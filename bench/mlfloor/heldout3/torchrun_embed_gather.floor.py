import torch

torch.distributed.init_process_group("gloo")
torch.distributed.all_gather([torch.zeros(4), torch.zeros(4)], torch.zeros(3))
