from tokenizers import Tokenizer, models
from transformers import DataCollatorWithPadding, PreTrainedTokenizerFast

tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1}, unk_token="[UNK]")), pad_token="[PAD]")
DataCollatorWithPadding(tokenizer)([{"input_ids": [1, 1], "labels": [0, 0]}, {"input_ids": [1], "labels": [0]}])
