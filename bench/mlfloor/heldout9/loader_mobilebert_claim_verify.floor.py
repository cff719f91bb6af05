from transformers import BertTokenizer

BertTokenizer()(["a", "b"], ["a"])
