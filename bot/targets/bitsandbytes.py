"""bitsandbytes-foundation/bitsandbytes: its bug-report form, the block ``python -m
bitsandbytes`` prints, and its section of the environment probe (the native library it loaded)."""
from __future__ import annotations

import os

from bot.targets.base import EXPECTED, REPRODUCTION, ProbeSection, Target, system_info_field
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


# --- its section of the environment probe ---------------------------------------------------------
# These two functions run in the USER's interpreter, inside the probe (bot/env/probe.py ships their
# source there): Python 3.9+, the standard library, ``_installed`` and ``_err`` from the probe. They
# are never called in reprobot's own process, which never imports the user's stack.

def _mapped_bnb_libs():
    libs = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1] if line.strip() else ""
                base = os.path.basename(path)
                if base.startswith("libbitsandbytes") and path not in libs:
                    libs.append(path)
    except OSError:
        pass
    return libs


def section_bitsandbytes():
    # bitsandbytes imports torch; when it is absent, neither is imported here.
    if not _installed("bitsandbytes"):  # noqa: F821 (the probe's)
        return {"installed": False}
    try:
        import bitsandbytes
        from bitsandbytes import cextension
    except BaseException as e:
        return {"installed": True, "import_error": _err(e), "mapped_libraries": _mapped_bnb_libs()}  # noqa: F821
    out = {"installed": True, "version": getattr(bitsandbytes, "__version__", None),
           "backend": getattr(cextension, "BNB_BACKEND", None)}
    lib = getattr(cextension, "lib", None)
    if lib is None:
        out["library"] = None
    else:
        # Recent versions wrap the ctypes CDLL in BNBNativeLibrary._lib; an error stand-in carries
        # error_msg. Read __dict__ directly: the wrappers' __getattr__ forwards or raises.
        attrs = getattr(lib, "__dict__", {})
        cdll = attrs.get("_lib", lib)
        out["library"] = getattr(cdll, "_name", None)
        out["library_class"] = type(lib).__name__
        if "error_msg" in attrs:
            out["library_error"] = str(attrs["error_msg"]).strip().splitlines()[0][:300]
        compiled = getattr(type(lib), "compiled_with_cuda", None)
        if compiled is not None:
            out["compiled_with_cuda"] = bool(compiled)
    out["mapped_libraries"] = _mapped_bnb_libs()
    return out


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
    # Its import banner must not reach the probe's output: the variable is set before any section.
    probe_section=ProbeSection("bitsandbytes", (_mapped_bnb_libs, section_bitsandbytes), imports="bitsandbytes",
                               environment=(("BITSANDBYTES_NOWELCOME", "1"),)),
)
