import torch, transformers

transformers.VideoMAEModel(transformers.VideoMAEConfig(num_hidden_layers=0))(torch.zeros(1, 1, 1, 1, 1))
