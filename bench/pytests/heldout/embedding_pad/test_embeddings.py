import pytest
from transformers import BertConfig, BertModel


@pytest.mark.parametrize("vocab_size", [16, 64])
@pytest.mark.parametrize("pad_token_id", [0, 40], ids=["pad-first", "pad-past-vocab"])
def test_bert_builds(small_dims, vocab_size, pad_token_id, monkeypatch):
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "error")
    config = BertConfig(vocab_size=vocab_size, pad_token_id=pad_token_id, **small_dims)
    model = BertModel(config)
    assert model.embeddings.word_embeddings.padding_idx == pad_token_id
