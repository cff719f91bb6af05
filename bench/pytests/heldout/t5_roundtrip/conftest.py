import pytest
from transformers import T5Config, T5ForConditionalGeneration


@pytest.fixture
def t5_config():
    return T5Config(vocab_size=32, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2,
                    decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)


@pytest.fixture
def t5_dir(tmp_path, t5_config):
    T5ForConditionalGeneration(t5_config).save_pretrained(tmp_path / "t5")
    return tmp_path / "t5"
