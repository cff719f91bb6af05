import torch
from transformers import WhisperConfig, WhisperForAudioClassification

WhisperForAudioClassification(WhisperConfig(d_model=8, encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=8, num_mel_bins=1, max_source_positions=1))(torch.zeros(1, 1, 2, dtype=torch.float64))
