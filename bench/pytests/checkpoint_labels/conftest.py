import pytest
from transformers import BertConfig


@pytest.fixture
def bert_config():
    return BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=16, max_position_embeddings=16, num_labels=2)
