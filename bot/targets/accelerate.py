"""huggingface/accelerate: its bug-report form, the block ``accelerate env`` prints, and its section
of the environment probe (the default config file that block shows)."""
from __future__ import annotations

import os

from bot.targets.base import EXPECTED, OWN_SCRIPTS, REPRODUCTION, ProbeSection, Target, checkboxes, system_info_field
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


# --- its section of the environment probe ---------------------------------------------------------
# These two functions run in the USER's interpreter, inside the probe (bot/env/probe.py ships their
# source there): Python 3.9+, the standard library, ``_installed`` and ``_err`` from the probe. They
# are never called in reprobot's own process, which never imports the user's stack.

def _accelerate_config_path():
    # accelerate's own rule (accelerate/commands/config/config_args.py).
    home = os.path.expanduser(os.environ.get("HF_HOME", os.path.join(
        os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")))
    return os.path.join(home, "accelerate", "default_config.yaml")


def section_accelerate_config():
    path = _accelerate_config_path()
    if not os.path.isfile(path):
        return {"found": False}
    out = {"found": True, "path": path}
    if _installed("accelerate"):  # noqa: F821 (the probe's)
        try:
            from accelerate.commands.config import load_config_from_file
            out["config"] = load_config_from_file(None).to_dict()
            return out
        except BaseException as e:
            out["load_error"] = _err(e)  # noqa: F821
    try:
        import yaml
        with open(path, encoding="utf-8") as fh:
            out["config"] = yaml.safe_load(fh)
    except Exception:
        with open(path, encoding="utf-8", errors="replace") as fh:
            out["raw"] = fh.read(20000)
    return out


TARGET = Target(
    recipes="accelerate.py", key="accelerate", repo="huggingface/accelerate", packages=("accelerate",), order=30,
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
    probe_section=ProbeSection("accelerate_config", (_accelerate_config_path, section_accelerate_config)),
)
