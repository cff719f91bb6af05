import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

CONTEXT = 8


@pytest.fixture(scope="module")
def tiny_gpt2():
    config = GPT2Config(vocab_size=16, n_positions=CONTEXT, n_embd=8, n_layer=1, n_head=2,
                        bos_token_id=0, eos_token_id=1, pad_token_id=1)
    return GPT2LMHeadModel(config).eval()


@pytest.fixture
def prompt():
    return torch.tensor([[2, 3, 4]])


@pytest.mark.parametrize(
    "new_tokens",
    [pytest.param(2, id="short"), pytest.param(4, id="fits"), pytest.param(16, id="past-context")],
)
def test_greedy_lengths(tiny_gpt2, prompt, new_tokens):
    out = tiny_gpt2.generate(prompt, max_new_tokens=new_tokens, do_sample=False, min_new_tokens=new_tokens)
    assert out.shape[1] == prompt.shape[1] + new_tokens
