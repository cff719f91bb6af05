import torch.nn.utils.prune

torch.nn.utils.prune.l1_unstructured(torch.nn.Linear(1, 1), "weight", 2)
