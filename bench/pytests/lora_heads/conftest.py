import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


@pytest.fixture
def llama_config():
    return LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)


@pytest.fixture
def tiny_llama(llama_config):
    model = LlamaForCausalLM(llama_config)
    model.eval()
    return model
