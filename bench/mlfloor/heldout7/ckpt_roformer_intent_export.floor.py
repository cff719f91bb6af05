from transformers import RoFormerConfig, RoFormerForSequenceClassification

RoFormerForSequenceClassification.from_pretrained(None, config=RoFormerConfig(hidden_size=8, embedding_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8), dtype="bf16")
