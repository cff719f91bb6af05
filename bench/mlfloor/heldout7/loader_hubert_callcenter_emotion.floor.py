from transformers import Wav2Vec2FeatureExtractor

Wav2Vec2FeatureExtractor(return_attention_mask=True)([0.0], sampling_rate=8000)
