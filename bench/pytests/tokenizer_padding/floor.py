from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast
tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"[PAD]": 0}, unk_token="[PAD]")), pad_token="[PAD]")
tok.padding_side = "middle"
tok(["a", "a a"], padding=True)
