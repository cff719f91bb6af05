import tempfile
from transformers import ElectraConfig, ElectraForSequenceClassification

with tempfile.TemporaryDirectory() as d:
    ElectraForSequenceClassification(ElectraConfig(embedding_size=8, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2)).save_pretrained(d)
    ElectraForSequenceClassification.from_pretrained(d, num_labels=3)
