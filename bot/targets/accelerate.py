"""huggingface/accelerate: its bug-report form and the block ``accelerate env`` prints."""
from __future__ import annotations

from bot.targets.base import EXPECTED, OWN_SCRIPTS, REPRODUCTION, Target, checkboxes, system_info_field
from bot.targets.sysinfo import (accelerate_config_lines, cuda_notes, fields, gpu_names, install_notes, platform_of,
                                 python_of, torch_of, version_of)


def render(env: dict) -> str:
    t = torch_of(env)
    mem = (env.get("memory") or {}).get("total_bytes")
    tools = env.get("tools") or {}
    items = [
        ("`Accelerate` version", version_of(env, "accelerate")),
        ("Platform", platform_of(env)),
        ("`accelerate` bash location", tools.get("accelerate_cli") or "Not found"),
        ("Python version", python_of(env)),
        ("Numpy version", version_of(env, "numpy")),
        ("PyTorch version", t.get("version") or "not installed"),
        ("PyTorch accelerator", t.get("accelerator") or "N/A"),
        ("System RAM", f"{mem / 1024 ** 3:.2f} GB" if mem else "unknown"),
    ]
    if t.get("accelerator") == "CUDA":
        items.append(("GPU type", (gpu_names(env) or ["unknown"])[0]))
    text = fields(items) + "\n- `Accelerate` default config:\n" + accelerate_config_lines(env, "Not found")
    extra = install_notes(env) + cuda_notes(env)
    return text + ("\n" + fields(extra) if extra else "")


TARGET = Target(
    key="accelerate", repo="huggingface/accelerate", packages=("accelerate",), order=30,
    fields=(system_info_field("Shell"),
            checkboxes("information-scripts-examples", "Information", OWN_SCRIPTS),
            checkboxes("information-tasks", "Tasks",
                       ("One of the scripts in the examples/ folder of Accelerate or an officially supported "
                        "`no_trainer` script in the `examples` folder of the `transformers` repo (such as "
                        "`run_no_trainer_glue.py`)",
                        "My own task or dataset (give details below)")),
            REPRODUCTION, EXPECTED),
    render_system_info=render, system_info_command="accelerate env",
    api_names=(r"\b(?:accelerator|Accelerator|AcceleratorState|PartialState|GradientState|"
               r"dispatch_model|infer_auto_device_map|load_checkpoint_and_dispatch|load_checkpoint_in_model|"
               r"init_empty_weights|init_on_device|cpu_offload|disk_offload|notebook_launcher|"
               r"get_balanced_memory|find_executable_batch_size|AlignDevicesHook|"
               r"set_module_tensor_to_device|skip_first_batches)\b|\baccelerate (?:launch|config|env)\b|"
               r"from 'accelerate|\baccelerate\.\w"),
    api_rank=2,
    callee_names=("AlignDevicesHook", "Accelerator", "dispatch_model", "init_empty_weights",
                  "set_module_tensor_to_device"),
    area_prefixes=(("accelerate/big_modeling", "big-model inference"),
                   ("accelerate/hooks", "big-model inference"),
                   ("accelerate/utils/modeling", "model loading"),
                   ("accelerate/accelerator", "distributed"),
                   ("accelerate/state", "distributed")),
    checkout_parent="src",
    env_packages=("numpy",),
    probe_import=True,
)
