"""Tokenize a ragged batch into tensors without padding, with a tokenizer saved beside the script."""
from transformers import AutoTokenizer

TOKENIZER_DIR = "tiny-tokenizer"
tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
texts = ["the cat sat on the mat", "the dog"]
print(tokenizer.tokenize(texts[0]))
batch = tokenizer(texts, return_tensors="pt")
