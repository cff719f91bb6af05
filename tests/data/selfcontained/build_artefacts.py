"""The binary artefacts of the corpus, built from configs (no download): a saved tiny Llama
checkpoint and a LoRA adapter saved from it. ``python build_artefacts.py CASE_DIR`` builds what
that case reads; the text artefacts are committed as they are."""
import sys
from pathlib import Path

TINY_LLAMA = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)


def tiny_llama():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**TINY_LLAMA))


def checkpoint(folder: Path) -> None:
    tiny_llama().save_pretrained(folder / "tiny-llama")


def adapter(folder: Path) -> None:
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(tiny_llama(), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    model.save_pretrained(folder / "adapter")


BUILDS = {"ckpt_model": checkpoint, "adapter_dir": adapter}

if __name__ == "__main__":
    case = Path(sys.argv[1])
    BUILDS.get(case.name, lambda folder: None)(case)
