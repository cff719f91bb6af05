"""bitsandbytes-foundation/bitsandbytes: its bug-report form and the block ``python -m
bitsandbytes`` prints."""
from __future__ import annotations

from bot.targets.base import EXPECTED, REPRODUCTION, Target, system_info_field
from bot.targets.sysinfo import fields, gpu_names, install_notes, platform_of, python_of, torch_of, version_of

# bitsandbytes/diagnostics/main.py lists these under "Related packages".
RELATED = ("accelerate", "diffusers", "numpy", "pip", "peft", "safetensors", "transformers", "triton", "trl")


def _header(text: str, width: int = 60, filler: str = "=") -> str:
    # bitsandbytes/diagnostics/utils.py print_header
    text = f" {text} " if text else ""
    return text.center(width, filler)


def render(env: dict) -> str:
    t = torch_of(env)
    plat = env.get("platform") or {}
    bnb = env.get("bitsandbytes") or {}
    title = f"bitsandbytes v{bnb_v}" if (bnb_v := version_of(env, "bitsandbytes", "")) else "bitsandbytes (not installed)"
    lines = [_header(title), f"Platform: {platform_of(env)}"]
    if plat.get("system") == "Linux" and plat.get("libc"):
        lines.append(f"  libc: {plat['libc']}")
    lines.append(f"Python: {python_of(env)}")
    lines.append(f"PyTorch: {t.get('version') or 'not installed'}")
    lines.append(f"  CUDA: {t.get('cuda_built') or 'N/A'}")
    lines.append(f"  HIP: {t.get('hip_built') or 'N/A'}")
    lines.append(f"  XPU: {t.get('xpu_built') or 'N/A'}")
    lines.append("Related packages:")
    lines += [f"  {name}: {version_of(env, name, 'not found')}" for name in RELATED]
    lines.append(_header(""))
    backend = bnb.get("backend") or ("ROCm" if t.get("hip_built") else "CUDA")
    if bnb.get("installed"):
        if bnb.get("import_error") or bnb.get("probe_error"):
            lines.append(f"bitsandbytes import failed: {bnb.get('import_error') or bnb.get('probe_error')}")
        lib = bnb.get("library") or ", ".join(bnb.get("mapped_libraries") or []) or "none"
        lines.append(f"Native library loaded: {lib}")
        if bnb.get("library_error"):
            lines.append(f"Native library error: {bnb['library_error']}")
    gpus = gpu_names(env)
    if t.get("cuda_available"):
        caps = [tuple(int(x) for x in d["capability"].split(".")) for d in t.get("devices") or [] if d.get("capability")]
        if t.get("cuda_built"):
            lines.append(f"PyTorch settings found: CUDA_VERSION={t['cuda_built'].replace('.', '')}, "
                         f"Highest Compute Capability: {max(caps) if caps else 'unknown'}.")
        lines.append(f"GPUs: {', '.join(gpus) or 'unknown'}")
        if (env.get("gpu") or {}).get("driver_version"):
            lines.append(f"NVIDIA driver: {env['gpu']['driver_version']}")
    elif t.get("installed"):
        lines += [f"PyTorch says {backend} is not available. Possible reasons:",
                  f"1. {backend} driver not installed", "2. Using a CPU-only PyTorch build", "3. No GPU detected"]
    notes = install_notes(env)
    if notes:
        lines.append(fields(notes))
    return "\n".join(lines)


TARGET = Target(
    key="bitsandbytes", repo="bitsandbytes-foundation/bitsandbytes", packages=("bitsandbytes",), order=40,
    fields=(system_info_field(), REPRODUCTION, EXPECTED),
    render_system_info=render, system_info_command="python -m bitsandbytes",
    api_names=(r"\b(?:bnb|bitsandbytes)\.|\bpython -m bitsandbytes\b|\bimport bitsandbytes\b|"
               r"\b(?:Params4bit|Int8Params|Linear4bit|Linear8bitLt|LinearNF4|LinearFP4|Embedding4bit|"
               r"QuantState|MatmulLtState|GlobalOptimManager|(?:Paged)?(?:AdamW?|Lion|RMSprop|SGD|LAMB|LARS)"
               r"(?:8bit|32bit)|StableEmbedding|quantize_4bit|dequantize_4bit|matmul_4bit)\b"),
    api_rank=0,
    callee_names=("Params4bit", "Int8Params", "Linear4bit", "Linear8bitLt", "QuantState", "LinearFP4",
                  "LinearNF4", "MatmulLtState", "Embedding4bit"),
    area_prefixes=(("bitsandbytes/", "quantization"),),
    checkout_parent="bitsandbytes",
    # Its import is probed by the probe's own bitsandbytes section (native library, backend);
    # the targets among RELATED are recorded as targets already.
    env_packages=("diffusers", "numpy", "pip", "safetensors", "triton"),
)
