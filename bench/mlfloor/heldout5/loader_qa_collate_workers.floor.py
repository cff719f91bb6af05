from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"a": 0}, unk_token="a")))(["a", "a", "a"], ["a"], is_split_into_words=True, truncation="only_second", max_length=2)
