"""huggingface/trl: its bug-report form (.github/ISSUE_TEMPLATE/bug-report.yml: Reproduction
first, no expected-behaviour field, a checklist whose options are each required) and the block
``trl env`` prints."""
from __future__ import annotations

from bot.targets.base import REPRODUCTION, Target, checkboxes, system_info_field
from bot.targets.sysinfo import (INSTALL_NOTED, cuda_notes, fields, gpu_names, install_notes, platform_of, python_of,
                                 torch_of, version_of)

# Every option is required on its own (GitHub refuses the form until all are ticked), so a
# draft ticks what reprobot can vouch for and leaves the rest to the reporter.
CHECKLIST = (
    "I have checked that my issue isn't already filed (see [open issues]"
    "(https://github.com/huggingface/trl/issues?q=is%3Aissue))",
    "I have included my system information",
    "Any code provided is minimal, complete, and reproducible ([more on MREs]"
    "(https://docs.github.com/en/get-started/writing-on-github/working-with-advanced-formatting/"
    "creating-and-highlighting-code-blocks))",
    "Any code provided is properly formatted in code blocks, (no screenshot, [more on code blocks]"
    "(https://docs.github.com/en/get-started/writing-on-github/working-with-advanced-formatting/"
    "creating-and-highlighting-code-blocks))",
    "Any traceback provided is complete",
)


# trl/scripts/env.py (what `trl env` prints): these names, in this order.
def render(env: dict) -> str:
    t = torch_of(env)
    gpus = gpu_names(env)
    devices = ", ".join(gpus) if t.get("accelerator") == "CUDA" and gpus else (
        "MPS" if t.get("accelerator") == "MPS" else "cpu")
    acc_cfg = env.get("accelerate_config") or {}
    if acc_cfg.get("found") and isinstance(acc_cfg.get("config"), dict):
        acc = "\n" + "\n".join(f"  - {k}: {v}" for k, v in acc_cfg["config"].items())
    else:
        acc = "not found"
    items = [
        ("Platform", platform_of(env)),
        ("Python version", python_of(env)),
        ("TRL version", version_of(env, "trl")),
        ("PyTorch version", t.get("version") or "not installed"),
        ("accelerator(s)", devices),
        ("Transformers version", version_of(env, "transformers")),
        ("Accelerate version", version_of(env, "accelerate")),
        ("Accelerate config", acc),
        ("Datasets version", version_of(env, "datasets")),
        ("HF Hub version", version_of(env, "huggingface_hub")),
        ("bitsandbytes version", version_of(env, "bitsandbytes")),
        ("DeepSpeed version", version_of(env, "deepspeed")),
        ("Liger-Kernel version", version_of(env, "liger_kernel")),
        ("PEFT version", version_of(env, "peft")),
        ("vLLM version", version_of(env, "vllm")),
    ]
    return fields(items + install_notes(env, ("trl",) + INSTALL_NOTED) + cuda_notes(env))


TARGET = Target(
    key="trl", repo="huggingface/trl", packages=("trl",), order=50,
    fields=(REPRODUCTION, system_info_field(),
            checkboxes("terms", "Checklist", CHECKLIST, required_options=CHECKLIST)),
    render_system_info=render, system_info_command="trl env",
    api_names=(r"\b(?:(?:SFT|DPO|GRPO|KTO|RLOO|PPO|ORPO|CPO|BCO|GKD|XPO|NashMD|OnlineDPO|PRM|Reward)"
               r"(?:Trainer|Config)|AutoModelFor(?:CausalLM|Seq2SeqLM)WithValueHead|"
               r"DataCollatorForCompletionOnlyLM|setup_chat_format|clone_chat_template)\b|"
               r"\btrl (?:sft|dpo|grpo|kto|rloo|env|vllm-serve)\b|from 'trl|\btrl\.\w"),
    api_rank=3,
    callee_names=("SFTTrainer", "DPOTrainer", "GRPOTrainer", "SFTConfig", "DPOConfig", "GRPOConfig"),
    checkout_parent="trl",
    env_packages=("datasets", "huggingface_hub", "deepspeed", "liger_kernel", "vllm"),
    wires_integrations=True,
    draft_notes=("trl's checklist must be ticked item by item before GitHub accepts the form: reprobot ticked "
                 "what the draft itself shows; tick the rest once you have checked them (the related issues "
                 "help with the first)",),
)
