"""The System-Info renderers: one function per shape a target repository's bug form asks for,
each taking env.json and returning the text its own command would print.

Each mirrors what the repository's own command prints (``transformers env``, ``accelerate
env``, ``python -m bitsandbytes``, ``trl env``, ``python -m torch.utils.collect_env``; for peft
the versions its form asks for), so a maintainer sees the shape they expect. Built from
env.json rather than by running those commands, so it works when they crash, are missing, or
the failing machine is not this one. Lines after the command's own fields (install sources,
GPUs) are additions reprobot knows and the commands do not print; they come last so the
familiar part reads unchanged.

The target registry (bot/upstream/targets.py) names the renderer of each repository; this
module imports nothing of reprobot's so the registry can.
"""
from __future__ import annotations

from typing import Any

# bitsandbytes/diagnostics/main.py lists these under "Related packages".
BNB_RELATED = ("accelerate", "diffusers", "numpy", "pip", "peft", "safetensors", "transformers", "triton", "trl")


def _pkg(env: dict, name: str) -> dict:
    pkg = (env.get("packages") or {}).get(name)
    return pkg if isinstance(pkg, dict) else {"installed": False}


def version_of(env: dict, name: str, absent: str = "not installed") -> str:
    pkg = _pkg(env, name)
    return str(pkg.get("version")) if pkg.get("installed") and pkg.get("version") else absent


def _platform(env: dict) -> str:
    return (env.get("platform") or {}).get("platform") or "unknown"


def _python(env: dict) -> str:
    return (env.get("python") or {}).get("version") or "unknown"


def _torch(env: dict) -> dict:
    return env.get("torch") or {}


def _gpu_names(env: dict) -> list[str]:
    gpus = (env.get("gpu") or {}).get("gpus") or []
    return [g.get("name") or "unknown" for g in gpus]


def _fields(items: list[tuple[str, str]]) -> str:
    return "\n".join(f"- {k}: {v}" for k, v in items)


def _accelerate_config_lines(env: dict, absent: str) -> str:
    # Both commands print a found config as tab-indented "- key: value" lines.
    cfg = env.get("accelerate_config") or {}
    if cfg.get("found") and isinstance(cfg.get("config"), dict):
        return "\n".join(f"\t- {k}: {v}" for k, v in cfg["config"].items())
    if cfg.get("found"):
        return "\t(found, unreadable: " + str(cfg.get("load_error") or "not a mapping") + ")"
    return f"\t{absent}"


def install_notes(env: dict, names: tuple[str, ...] = ("torch", "transformers", "peft", "accelerate",
                                                       "bitsandbytes", "safetensors", "huggingface_hub",
                                                       "tokenizers")) -> list[tuple[str, str]]:
    """Packages not installed from an index, and imports that failed: what the commands hide."""
    notes = []
    for name in names:
        pkg = _pkg(env, name)
        if not pkg.get("installed"):
            continue
        kind = pkg.get("kind")
        if kind == "vcs":
            notes.append((f"{name} installed from", f"{pkg.get('vcs', 'git')}+{pkg.get('url')}@{pkg.get('commit')}"))
        elif kind in ("editable", "local-dir"):
            notes.append((f"{name} installed from", f"{kind} checkout {pkg.get('url')}"))
        elif kind == "archive":
            notes.append((f"{name} installed from", f"archive {pkg.get('url')}"))
        imp = pkg.get("import")
        if imp and imp != "ok":
            notes.append((f"{name} import", f"FAILED ({imp})"))
        if pkg.get("module_version"):
            notes.append((f"{name}.__version__", f"{pkg['module_version']} (metadata says {pkg.get('version')})"))
    return notes


def render_transformers(env: dict) -> str:
    t = _torch(env)
    accel_installed = _pkg(env, "accelerate").get("installed")
    acc_cfg = _accelerate_config_lines(env, "not found") if accel_installed else "not found"
    if t.get("installed") and t.get("version"):
        accel = {"CUDA": "CUDA", "XPU": "XPU"}.get(t.get("accelerator") or "", "NA")
        pt = f"{t['version']} ({accel})"
    else:
        accel, pt = "NA", "not installed (NA)"
    items = [
        ("`transformers` version", version_of(env, "transformers")),
        ("Platform", _platform(env)),
        ("Python version", _python(env)),
        ("Huggingface_hub version", version_of(env, "huggingface_hub")),
        ("Safetensors version", version_of(env, "safetensors", "unknown")),
        ("Accelerate version", version_of(env, "accelerate")),
        ("Accelerate config", acc_cfg),
        ("DeepSpeed version", version_of(env, "deepspeed")),
        ("PyTorch version (accelerator?)", pt),
        ("Using distributed or parallel set-up in script?", "<fill in>"),
    ]
    if accel == "CUDA":
        items += [("Using GPU in script?", "<fill in>"), ("GPU type", (_gpu_names(env) or ["unknown"])[0])]
    return _fields(items + install_notes(env) + _cuda_notes(env))


def render_accelerate(env: dict) -> str:
    t = _torch(env)
    mem = (env.get("memory") or {}).get("total_bytes")
    tools = env.get("tools") or {}
    items = [
        ("`Accelerate` version", version_of(env, "accelerate")),
        ("Platform", _platform(env)),
        ("`accelerate` bash location", tools.get("accelerate_cli") or "Not found"),
        ("Python version", _python(env)),
        ("Numpy version", version_of(env, "numpy")),
        ("PyTorch version", t.get("version") or "not installed"),
        ("PyTorch accelerator", t.get("accelerator") or "N/A"),
        ("System RAM", f"{mem / 1024 ** 3:.2f} GB" if mem else "unknown"),
    ]
    if t.get("accelerator") == "CUDA":
        items.append(("GPU type", (_gpu_names(env) or ["unknown"])[0]))
    text = _fields(items) + "\n- `Accelerate` default config:\n" + _accelerate_config_lines(env, "Not found")
    extra = install_notes(env) + _cuda_notes(env)
    return text + ("\n" + _fields(extra) if extra else "")


def _cuda_notes(env: dict) -> list[tuple[str, str]]:
    t = _torch(env)
    gpu = env.get("gpu") or {}
    notes = []
    if t.get("cuda_built") or t.get("hip_built"):
        built = f"CUDA {t['cuda_built']}" if t.get("cuda_built") else f"ROCm {t['hip_built']}"
        notes.append(("PyTorch built with", built + (f", cuDNN {t['cudnn']}" if t.get("cudnn") else "")))
    gpus = gpu.get("gpus") or []
    if gpus:
        desc = [f"{g.get('name')} ({g['memory_bytes'] / 1024 ** 3:.1f} GiB)" if g.get("memory_bytes")
                else str(g.get("name")) for g in gpus]
        notes.append(("GPUs", "; ".join(desc)))
    if gpu.get("driver_version"):
        notes.append(("NVIDIA driver", gpu["driver_version"]))
    return notes


def render_peft(env: dict) -> str:
    t = _torch(env)
    torch_v = t.get("version") or "not installed"
    if t.get("version"):
        torch_v += f" (accelerator: {t.get('accelerator') or 'N/A'})"
    items = [
        ("peft version", version_of(env, "peft")),
        ("transformers version", version_of(env, "transformers")),
        ("accelerate version", version_of(env, "accelerate")),
        ("torch version", torch_v),
    ]
    if _pkg(env, "bitsandbytes").get("installed"):
        items.append(("bitsandbytes version", version_of(env, "bitsandbytes")))
    items += [("Platform", _platform(env)), ("Python version", _python(env))]
    return _fields(items + install_notes(env) + _cuda_notes(env))


def _header(text: str, width: int = 60, filler: str = "=") -> str:
    # bitsandbytes/diagnostics/utils.py print_header
    text = f" {text} " if text else ""
    return text.center(width, filler)


def render_bitsandbytes(env: dict) -> str:
    t = _torch(env)
    plat = env.get("platform") or {}
    bnb = env.get("bitsandbytes") or {}
    title = f"bitsandbytes v{bnb_v}" if (bnb_v := version_of(env, "bitsandbytes", "")) else "bitsandbytes (not installed)"
    lines = [_header(title), f"Platform: {_platform(env)}"]
    if plat.get("system") == "Linux" and plat.get("libc"):
        lines.append(f"  libc: {plat['libc']}")
    lines.append(f"Python: {_python(env)}")
    lines.append(f"PyTorch: {t.get('version') or 'not installed'}")
    lines.append(f"  CUDA: {t.get('cuda_built') or 'N/A'}")
    lines.append(f"  HIP: {t.get('hip_built') or 'N/A'}")
    lines.append(f"  XPU: {t.get('xpu_built') or 'N/A'}")
    lines.append("Related packages:")
    lines += [f"  {name}: {version_of(env, name, 'not found')}" for name in BNB_RELATED]
    lines.append(_header(""))
    backend = bnb.get("backend") or ("ROCm" if t.get("hip_built") else "CUDA")
    if bnb.get("installed"):
        if bnb.get("import_error") or bnb.get("probe_error"):
            lines.append(f"bitsandbytes import failed: {bnb.get('import_error') or bnb.get('probe_error')}")
        lib = bnb.get("library") or ", ".join(bnb.get("mapped_libraries") or []) or "none"
        lines.append(f"Native library loaded: {lib}")
        if bnb.get("library_error"):
            lines.append(f"Native library error: {bnb['library_error']}")
    gpus = _gpu_names(env)
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
        lines.append(_fields(notes))
    return "\n".join(lines)


# trl/scripts/env.py (what `trl env` prints): these names, in this order.
def render_trl(env: dict) -> str:
    t = _torch(env)
    gpus = _gpu_names(env)
    devices = ", ".join(gpus) if t.get("accelerator") == "CUDA" and gpus else (
        "MPS" if t.get("accelerator") == "MPS" else "cpu")
    acc_cfg = env.get("accelerate_config") or {}
    if acc_cfg.get("found") and isinstance(acc_cfg.get("config"), dict):
        acc = "\n" + "\n".join(f"  - {k}: {v}" for k, v in acc_cfg["config"].items())
    else:
        acc = "not found"
    items = [
        ("Platform", _platform(env)),
        ("Python version", _python(env)),
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
    return _fields(items + install_notes(env, ("trl",) + _INSTALL_NOTED) + _cuda_notes(env))


_INSTALL_NOTED = ("torch", "transformers", "peft", "accelerate", "bitsandbytes", "safetensors", "huggingface_hub",
                  "tokenizers")
# torch/utils/collect_env.py lists installed distributions whose names contain one of these.
_COLLECT_ENV_PATTERNS = ("torch", "numpy", "triton", "optree", "mypy", "flake8", "onnx", "cuda-", "cublas",
                         "cudnn", "cufft", "curand", "cusolver", "cusparse", "nccl", "nvjitlink", "nvtx", "mkl")
COLLECT_ENV = "python -m torch.utils.collect_env"


def _yes_no(value: Any) -> str:
    # collect_env prints torch's own booleans with str(): "True" / "False".
    return "N/A" if value is None else str(bool(value))


def _collect_env_libraries(env: dict) -> list[str]:
    dists = env.get("distributions") or {}
    if not dists:
        dists = {n: p.get("version") for n, p in (env.get("packages") or {}).items()
                 if isinstance(p, dict) and p.get("installed")}
    return [f"[pip3] {name}=={ver}" for name, ver in sorted(dists.items(), key=lambda kv: kv[0].lower())
            if ver and any(p in name.lower() for p in _COLLECT_ENV_PATTERNS)]


def render_pytorch(env: dict) -> str:
    """The fields of ``python -m torch.utils.collect_env`` that env.json holds, in its order and
    wording; what env.json cannot know (compilers, CPU flags) is named as missing, not invented."""
    t = _torch(env)
    plat = env.get("platform") or {}
    gpu = env.get("gpu") or {}
    cuda = bool(t.get("cuda_available"))
    gpus = [f"GPU {i}: {name}" for i, name in enumerate(_gpu_names(env))]
    lines = [
        f"PyTorch version: {t.get('version') or 'N/A'}",
        f"Is debug build: {_yes_no(t.get('debug')) if t.get('version') else 'N/A'}",
        f"CUDA used to build PyTorch: {t.get('cuda_built') or ('None' if t.get('version') else 'N/A')}",
        f"ROCM used to build PyTorch: {t.get('hip_built') or 'N/A'}",
        "",
        f"OS: {plat.get('distro') or plat.get('mac_ver') or plat.get('win32_ver') or plat.get('system') or 'unknown'}"
        + (f" ({plat['machine']})" if plat.get("machine") else ""),
        f"Libc version: {plat.get('libc') or 'N/A'}",
        "",
        f"Python version: {(env.get('python') or {}).get('full_version') or _python(env)}"
        + (f" ({(env.get('python') or {}).get('bits')}-bit runtime)" if (env.get("python") or {}).get("bits") else ""),
        f"Python platform: {_platform(env)}",
        f"Is CUDA available: {_yes_no(t.get('cuda_available')) if t.get('version') else 'N/A'}",
        "GPU models and configuration: " + ("\n" + "\n".join(gpus) if cuda and gpus else ("No CUDA" if not cuda else
                                                                                      "unknown")),
        f"Nvidia driver version: {gpu.get('driver_version') or ('No CUDA' if not cuda else 'unknown')}",
        f"cuDNN version: {t.get('cudnn') or ('No CUDA' if not cuda else 'N/A')}",
        f"HIP runtime version: {t.get('hip_built') or 'N/A'}",
        "",
        "Versions of relevant libraries:",
        *(_collect_env_libraries(env) or ["[pip3] none found"]),
        "",
        f"(Compiler, CMake, CUDA runtime and CPU details are not in env.json: run `{COLLECT_ENV}` "
        "and add them if they matter.)",
    ]
    extra = install_notes(env, ("torch",))
    return "\n".join(lines) + ("\n" + _fields(extra) if extra else "")
