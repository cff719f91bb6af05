from peft import LoraConfig, PeftModel, get_peft_model
from transformers import (
    BitsAndBytesConfig,
    Gemma4Config,
    Gemma4ForConditionalGeneration,
    Gemma4TextConfig)

_tiny_config = Gemma4Config(
    text_config=Gemma4TextConfig(vocab_size=1, hidden_size=1, vocab_size_per_layer_input=1),
)
Gemma4ForConditionalGeneration(_tiny_config).save_pretrained('.')
get_peft_model(Gemma4ForConditionalGeneration(_tiny_config), LoraConfig()).save_pretrained('.')
PeftModel.from_pretrained(
    Gemma4ForConditionalGeneration.from_pretrained(
        '.',
        device_map={'model.vis': 'cpu', '': 0},
        quantization_config=BitsAndBytesConfig(
            bnb_4bit_use_double_quant=True,
            llm_int8_enable_fp32_cpu_offload=True,
        ),
    ),
    '',
    max_memory={0: 357440, 'cpu': '8GiB'},
)
