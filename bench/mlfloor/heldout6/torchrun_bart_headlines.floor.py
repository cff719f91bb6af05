import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from transformers import BartConfig, BartForConditionalGeneration

dist.init_process_group("gloo")
DistributedDataParallel(BartForConditionalGeneration(BartConfig(d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=8, decoder_ffn_dim=8))).generate()
