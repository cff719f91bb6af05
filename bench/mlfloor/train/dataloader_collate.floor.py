from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast
tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"[PAD]": 0, "a": 1}, unk_token="[PAD]")), pad_token="[PAD]")
tok.pad([{"input_ids": [1], "labels": [1]}, {"input_ids": [1, 1], "labels": [1, 1]}], return_tensors="pt")
