
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import (
    BitsAndBytesConfig,
    Gemma4Config,
    Gemma4ForConditionalGeneration,
    Gemma4TextConfig)
MODEL_HOME = Path()
OFFLOAD_DIR = MODEL_HOME / "offload_temp"

TINY_ARCHITECTURES = {
    "gemma4-tiny-it": {
        "text": dict(
            vocab_size=128, hidden_size=64, intermediate_size=128, num_attention_heads=2,
            num_key_value_heads=1, global_head_dim=32, vocab_size_per_layer_input=128,
            hidden_size_per_layer_input=16),
        "vision": dict(
            hidden_size=32, intermediate_size=64, num_attention_heads=2, position_embedding_size=64),
        "audio": dict(hidden_size=32),
    },
}


def _tiny_config(model_id: str) -> Gemma4Config:
    arch = TINY_ARCHITECTURES[model_id]
    return Gemma4Config(
        text_config=Gemma4TextConfig(**arch["text"]))
base_dir = Path()
Gemma4ForConditionalGeneration(_tiny_config("gemma4-tiny-it")).save_pretrained(base_dir)
kwargs = {"dtype": torch.bfloat16, "trust_remote_code": False, "low_cpu_mem_usage": False}
quant_config = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
        llm_int8_enable_fp32_cpu_offload=True,
    )
kwargs["quantization_config"] = quant_config
base_model = Gemma4ForConditionalGeneration.from_pretrained(
    base_dir,
    device_map={'model.vision_tower': 'cpu', 'model.audio_tower': 'cpu', '': 0},
    offload_folder=str(OFFLOAD_DIR),
    **kwargs,
)
lora_path = MODEL_HOME / "adapters/client-alpha"
lora = LoraConfig(r=8, lora_alpha=16, target_modules='.*language_model\\.layers\\.\\d+\\.(self_attn\\.(q_proj|k_proj|v_proj|o_proj)|mlp\\.(gate_proj|up_proj|down_proj))', lora_dropout=0.0,
                  bias="none", task_type="CAUSAL_LM", init_lora_weights=False)
get_peft_model(Gemma4ForConditionalGeneration(_tiny_config("gemma4-tiny-it")), lora).save_pretrained(lora_path)
PeftModel.from_pretrained(
    base_model, lora_path, adapter_name='client-alpha', is_trainable=False, max_memory={0: 231800, 'cpu': '8GiB'})
