from transformers import BertConfig, BertForMaskedLM
BertForMaskedLM(BertConfig(vocab_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8)).save_pretrained("ckpt")
BertForMaskedLM.from_pretrained("ckpt", vocab_size=9)
