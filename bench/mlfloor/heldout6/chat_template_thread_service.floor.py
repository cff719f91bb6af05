from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))
tok.chat_template = {"chat": "", "summarize": ""}
tok.apply_chat_template([{"role": "user", "content": "a"}])
