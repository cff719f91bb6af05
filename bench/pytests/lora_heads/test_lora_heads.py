import pytest
import torch
from peft import LoraConfig, get_peft_model

TARGETS = {
    "attention": ["q_proj", "v_proj"],
    "mlp": ["gate_prj"],
}


def count_lora_layers(model):
    return sum(1 for name, _ in model.named_modules() if name.endswith("lora_A"))


@pytest.mark.parametrize("targets", list(TARGETS.values()), ids=list(TARGETS))
def test_lora_wraps_attention(tiny_llama, targets):
    config = LoraConfig(r=4, lora_alpha=8, target_modules=targets, lora_dropout=0.0, task_type="CAUSAL_LM")
    model = get_peft_model(tiny_llama, config)
    assert count_lora_layers(model) == 2
    out = model(input_ids=torch.tensor([[1, 2, 3]]))
    assert out.logits.shape == (1, 3, 64)
