"""huggingface/peft: its bug-report form and the versions that form asks for, and how a repro puts an
adapter config on a model without the adapter's folder."""
from __future__ import annotations

from bot.targets.base import EXPECTED, REPRODUCTION, WHO_CAN_HELP, Target, system_info_field
from bot.targets.sysinfo import cuda_notes, fields, install_notes, pkg, platform_of, python_of, torch_of, version_of
from reducer.stack import Spelling


def render(env: dict) -> str:
    t = torch_of(env)
    torch_v = t.get("version") or "not installed"
    if t.get("version"):
        torch_v += f" (accelerator: {t.get('accelerator') or 'N/A'})"
    items = [
        ("peft version", version_of(env, "peft")),
        ("transformers version", version_of(env, "transformers")),
        ("accelerate version", version_of(env, "accelerate")),
        ("torch version", torch_v),
    ]
    if pkg(env, "bitsandbytes").get("installed"):
        items.append(("bitsandbytes version", version_of(env, "bitsandbytes")))
    items += [("Platform", platform_of(env)), ("Python version", python_of(env))]
    return fields(items + install_notes(env) + cuda_notes(env))


def adapter_wrapper(config_class: str) -> Spelling:
    """An adapter folder rebuilt in the repro (reducer/reduction/standalone.py): ``get_peft_model(model,
    LoraConfig(<its non-default values>))``, random adapter weights."""
    return Spelling("get_peft_model", (("peft", "get_peft_model"), ("peft", config_class)))


TARGET = Target(
    recipes="peft.py", key="peft", repo="huggingface/peft", packages=("peft",), order=20,
    fields=(system_info_field(), WHO_CAN_HELP, REPRODUCTION, EXPECTED),
    render_system_info=render,
    api_names=(r"\b(?:Peft\w*|AutoPeftModel\w*|Lora\w*|LoRA\w*|AdaLora\w*|IA3\w*|LoHa\w*|LoKr\w*|"
               r"PromptTuning\w*|PrefixTuning\w*|PromptEncoder\w*|ModulesToSaveWrapper|get_peft_model|"
               r"prepare_model_for_kbit_training|prepare_model_for_int8_training|inject_adapter_in_model|"
               r"get_peft_model_state_dict|set_peft_model_state_dict|merge_and_unload|add_weighted_adapter|"
               r"print_trainable_parameters|unload|delete_adapter|load_peft_weights|hotswap_adapter)\b|"
               r"from 'peft'|\bpeft\.\w"),
    api_rank=1,
    callee_names=("PeftModel", "LoraConfig", "LoraModel", "PeftConfig", "get_peft_model"),
    area_prefixes=(("peft/", "peft integration"),),
    checkout_parent="src",
    probe_import=True,
    adapter_wrapper=adapter_wrapper,
)
