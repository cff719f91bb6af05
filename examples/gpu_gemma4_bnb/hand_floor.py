# The hand floor of spawn_worker.py / inference_worker.py (scenario c): what a person writes for
# the maintainer, 7 statements. Written before the spawn worker was reduced; see results/RESULTS.md.
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import BitsAndBytesConfig, Gemma4Config, Gemma4ForConditionalGeneration, Gemma4TextConfig

config = Gemma4Config(text_config=Gemma4TextConfig(vocab_size=1, hidden_size=1, num_attention_heads=1,
                                                   num_key_value_heads=1, vocab_size_per_layer_input=1))
Gemma4ForConditionalGeneration(config).save_pretrained("base")
base = Gemma4ForConditionalGeneration.from_pretrained(
    "base", device_map={"model.vision_tower": "cpu", "": 0},
    quantization_config=BitsAndBytesConfig(bnb_4bit_use_double_quant=True, llm_int8_enable_fp32_cpu_offload=True))
get_peft_model(Gemma4ForConditionalGeneration(config), LoraConfig()).save_pretrained("adapter")
PeftModel.from_pretrained(base, "adapter", max_memory={0: 57950, "cpu": "8GiB"})
