"""A BERT built from a config folder named by an environment variable, fed a sequence longer than
its position table."""
import os
import torch
from transformers import AutoConfig, AutoModel

config_dir = os.environ["TINY_BERT_CONFIG"]
config = AutoConfig.from_pretrained(config_dir)
model = AutoModel.from_config(config)
model.eval()
ids = torch.arange(12).unsqueeze(0) % config.vocab_size
with torch.no_grad():
    print(model(input_ids=ids).last_hidden_state.shape)
