import torch


class TwoHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.used = torch.nn.Linear(2, 2)
        self.unused = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.used(x)


torch.distributed.init_process_group("gloo", init_method="tcp://127.0.0.1:29533", rank=0, world_size=1)
model = torch.nn.parallel.DistributedDataParallel(TwoHeads())
for step in range(2):
    model(torch.ones(1, 2)).sum().backward()
