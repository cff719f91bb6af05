from transformers import BertTokenizer

BertTokenizer()("a", truncation=True, max_length=3, stride=3)
