"""Fine-tune a tiny Llama with LoRA, the model split over the GPUs by max_memory.

Fails only when the model really is split over two cards: the LoRA scale is initialised from the
norms of the base weights, which live on cuda:0 and cuda:1, and torch.stack refuses to mix them
("Expected all tensors to be on the same device ..."). With one GPU visible everything is on
cuda:0 and the script trains and exits 0. No download: the model is built from a config.
"""
import math
import os
import tempfile

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

SEED = 0
STEPS = 3
BATCH = 2
SEQ = 16
LR = 1e-3


def tiny_config():
    return LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
                       tie_word_embeddings=False)


def save_tiny(folder):
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(tiny_config())
    model.save_pretrained(folder)
    return sum(p.numel() * p.element_size() for p in model.parameters())


def memory_per_card(model_bytes):
    """Split the model over the cards there are: each card takes a bit more than half."""
    n = torch.cuda.device_count()
    if n < 2:
        return {0: int(model_bytes * 4)}
    return {i: int(model_bytes * 0.6) for i in range(n)}


def load_split(folder, model_bytes):
    model = LlamaForCausalLM.from_pretrained(folder, device_map="auto", max_memory=memory_per_card(model_bytes),
                                             torch_dtype=torch.float32)
    # the parameters' own devices: with one card `device_map="auto"` may leave no hf_device_map
    devices = sorted({str(p.device) for p in model.parameters()})
    print("device map uses:", ", ".join(devices))
    return model


def lora_model(model):
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    return get_peft_model(model, config)


def init_lora_scale(model):
    """Scale LoRA's B matrices by the base weights' typical norm (a custom init)."""
    norms = [m.base_layer.weight.norm() for n, m in model.named_modules() if n.endswith(("q_proj", "v_proj"))]
    scale = torch.stack(norms).mean()
    for n, m in model.named_modules():
        if hasattr(m, "lora_B"):
            with torch.no_grad():
                m.lora_B["default"].weight.normal_(0, float(scale) / 100)
    return scale


def batches(vocab, device):
    g = torch.Generator().manual_seed(SEED)
    for _ in range(STEPS):
        ids = torch.randint(0, vocab, (BATCH, SEQ), generator=g)
        yield ids.to(device)


def train(model):
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LR)
    first = next(model.parameters()).device
    for step, ids in enumerate(batches(model.config.vocab_size, first)):
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: loss {out.loss.item():.3f} (ln vocab {math.log(model.config.vocab_size):.3f})")


def main():
    assert torch.cuda.is_available(), "this example needs CUDA"
    with tempfile.TemporaryDirectory() as folder:
        size = save_tiny(folder)
        model = load_split(folder, size)
        model = lora_model(model)
        model.print_trainable_parameters()
        print("LoRA scale:", float(init_lora_scale(model)))
        train(model)
    print("done on", os.environ.get("CUDA_VISIBLE_DEVICES", "all GPUs"))


if __name__ == "__main__":
    main()
