import pytest
import torch


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(1234)


@pytest.fixture
def small_dims():
    return {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16}
