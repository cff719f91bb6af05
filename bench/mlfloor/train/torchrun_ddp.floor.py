import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch import nn
dist.init_process_group("gloo")
DistributedDataParallel(nn.Linear(1, 1 + dist.get_rank()))
