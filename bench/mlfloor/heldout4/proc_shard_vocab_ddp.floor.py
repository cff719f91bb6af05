import torch


def run(rank):
    torch.distributed.init_process_group("gloo", init_method="tcp://127.0.0.1:29531", rank=rank, world_size=2)
    torch.nn.parallel.DistributedDataParallel(torch.nn.Embedding(4 - rank, 2))


torch.multiprocessing.start_processes(run, nprocs=2, start_method="fork")
