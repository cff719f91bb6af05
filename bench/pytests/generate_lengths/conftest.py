import pytest
import torch


@pytest.fixture(autouse=True)
def deterministic():
    torch.manual_seed(0)
    yield
    torch.use_deterministic_algorithms(False)
