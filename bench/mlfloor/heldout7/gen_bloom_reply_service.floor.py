from transformers import BloomConfig, BloomForCausalLM

BloomForCausalLM(BloomConfig(vocab_size=4, hidden_size=8, n_layer=1, n_head=2)).generate(max_length=1)
