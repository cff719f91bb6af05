# The hand floor of spawn_worker.py's CPU twin (REPRO_DEVICE=cpu): what a person writes for the
# maintainer, 4 statements, written before the twin was reduced (issue #38). The vision tower
# offloaded to disk makes accelerate's dispatch meet a meta buffer while transformers loads.
from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig, Gemma4VisionConfig

config = Gemma4Config(
    text_config=Gemma4TextConfig(vocab_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                                 num_key_value_heads=1, head_dim=8, vocab_size_per_layer_input=8,
                                 hidden_size_per_layer_input=8),
    vision_config=Gemma4VisionConfig(hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=1,
                                     num_key_value_heads=1, head_dim=8))
Gemma4ForConditionalGeneration(config).save_pretrained("base")
Gemma4ForConditionalGeneration.from_pretrained("base", device_map={"model.vision_tower": "disk", "": "cpu"},
                                               offload_folder="offload")
