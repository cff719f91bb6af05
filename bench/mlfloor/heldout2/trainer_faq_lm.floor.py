import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

model = LlamaForCausalLM(LlamaConfig(vocab_size=4, hidden_size=4, intermediate_size=4, num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1))
data = [{"input_ids": torch.tensor([1, 2]), "labels": torch.tensor([1, 2])}]
Trainer(model=model, args=TrainingArguments(max_steps=1, eval_strategy="steps", eval_steps=1, metric_for_best_model="perplexity", report_to="none", disable_tqdm=True), train_dataset=data, eval_dataset=data).train()
