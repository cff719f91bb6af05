from transformers import OlmoConfig, OlmoModel

OlmoModel(OlmoConfig(vocab_size=2, hidden_size=2, num_attention_heads=1, num_hidden_layers=0,
                     rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": None}))
