import os

os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
import torch


def run(rank):
    torch.distributed.init_process_group("gloo", init_method="tcp://127.0.0.1:29532", rank=rank, world_size=2)
    torch.distributed.all_gather([torch.zeros(2 - rank)] * 2, torch.zeros(2 - rank))


torch.multiprocessing.start_processes(run, nprocs=2, start_method="fork")
