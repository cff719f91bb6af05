import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.distributed.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=10))
model.gradient_checkpointing_enable({"use_reentrant": True})
ddp = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
ddp(torch.ones(1, 4, dtype=torch.long)).logits.sum().backward()
