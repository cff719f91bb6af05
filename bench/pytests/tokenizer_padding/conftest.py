import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import PreTrainedTokenizerFast

WORDS = ["[UNK]", "[PAD]", "the", "cat", "sat", "on", "mat"]


@pytest.fixture
def vocab():
    return {word: i for i, word in enumerate(WORDS)}


@pytest.fixture
def tokenizer(vocab):
    backend = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]")
    yield tok
    tok.padding_side = "right"
