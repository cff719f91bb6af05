"""Embed token ids read from a CSV file (argparse default), one of which is past the vocabulary."""
import argparse
import csv
import torch
from transformers import LlamaConfig, LlamaForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="tokens.csv")
parser.add_argument("--limit", type=int, default=100)
args = parser.parse_args()

with open(args.data, newline="") as f:
    rows = [row for row in csv.DictReader(f)][: args.limit]
ids = torch.tensor([[int(row["token_id"]) for row in rows]])
config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
model = LlamaForCausalLM(config)
print(model(input_ids=ids).logits.shape)
