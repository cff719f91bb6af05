from transformers import BertTokenizer

BertTokenizer().decode([-100])
