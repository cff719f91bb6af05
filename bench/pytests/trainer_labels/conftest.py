import pytest
from transformers import BertConfig, BertForSequenceClassification


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


@pytest.fixture
def classifier():
    config = BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16, num_labels=2)
    return BertForSequenceClassification(config)
