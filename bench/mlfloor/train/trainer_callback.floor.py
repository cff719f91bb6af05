import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments
class Evaluate(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        control.should_evaluate = True
ids = torch.tensor([1, 2])
Trainer(model=GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=1, vocab_size=8)), args=TrainingArguments(max_steps=1, report_to=[]), train_dataset=[{"input_ids": ids, "labels": ids}], callbacks=[Evaluate()]).train()
