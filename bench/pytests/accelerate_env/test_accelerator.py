import torch
from accelerate import Accelerator


def test_accumulation_from_env(accelerate_env):
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    assert accelerator.gradient_accumulation_steps == 2
