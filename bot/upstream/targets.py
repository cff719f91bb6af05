"""The repositories reprobot files at, and where failures that are not theirs belong."""
from __future__ import annotations

TARGETS: dict[str, str] = {
    "transformers": "huggingface/transformers",
    "peft": "huggingface/peft",
    "accelerate": "huggingface/accelerate",
    "bitsandbytes": "bitsandbytes-foundation/bitsandbytes",
}
# The keys every command, form, template and System-Info renderer is indexed by.
REPO_KEYS: tuple[str, ...] = tuple(TARGETS)
# Who owns the failures that are not ours, so the verdict can say where to go instead.
ELSEWHERE: dict[str, str] = {
    "torch": "pytorch/pytorch",
    "huggingface_hub": "huggingface/huggingface_hub",
    "safetensors": "huggingface/safetensors",
    "tokenizers": "huggingface/tokenizers",
    "datasets": "huggingface/datasets",
    "diffusers": "huggingface/diffusers",
    "trl": "huggingface/trl",
    "user code": "",
}
