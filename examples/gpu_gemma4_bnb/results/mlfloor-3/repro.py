from peft import PeftModel, LoraConfig, get_peft_model
from transformers import Gemma4ForConditionalGeneration, Gemma4Config, BitsAndBytesConfig

Gemma4ForConditionalGeneration(Gemma4Config(text_config={'vocab_size': 1, 'hidden_size': 64, 'intermediate_size': 1, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 32, 'vocab_size_per_layer_input': 1, 'hidden_size_per_layer_input': 1, 'per_layer_config': {}})).save_pretrained(
    'reprobot_model',
)
get_peft_model(Gemma4ForConditionalGeneration(Gemma4Config(text_config={'hidden_size': 64, 'num_hidden_layers': 1, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 32, 'per_layer_config': {}})), LoraConfig()).save_pretrained(
    'reprobot_client-alpha',
)
PeftModel.from_pretrained(
    Gemma4ForConditionalGeneration.from_pretrained(
        'reprobot_model',
        device_map={'model.vision_tower': 'cpu', '': 0},
        quantization_config=BitsAndBytesConfig(
            llm_int8_enable_fp32_cpu_offload=True,
            bnb_4bit_use_double_quant=True,
        ),
    ),
    'reprobot_client-alpha',
    max_memory={0: 28975, 'cpu': '8GiB'},
)
