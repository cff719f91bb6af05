from pathlib import Path
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import (
    BitsAndBytesConfig,
    Gemma4Config,
    Gemma4ForConditionalGeneration,
    Gemma4TextConfig)

MODEL_HOME = Path()


def _tiny_config():
    return Gemma4Config(
        text_config=Gemma4TextConfig(vocab_size=1, hidden_size=1, vocab_size_per_layer_input=1))


base_dir = Path()
Gemma4ForConditionalGeneration(_tiny_config()).save_pretrained(base_dir)
kwargs = {}
quant_config = BitsAndBytesConfig(
        bnb_4bit_use_double_quant=True,
        llm_int8_enable_fp32_cpu_offload=True)
kwargs["quantization_config"] = quant_config
base_model = Gemma4ForConditionalGeneration.from_pretrained(
    base_dir,
    device_map={'model.vis': 'cpu', '': 0},
    **kwargs)
lora = LoraConfig()
get_peft_model(Gemma4ForConditionalGeneration(_tiny_config()), lora).save_pretrained(MODEL_HOME)
PeftModel.from_pretrained(
    base_model, MODEL_HOME, max_memory={0: 273848, 'cpu': '8GiB'})
