"""pytorch/pytorch: its bug-report form (.github/ISSUE_TEMPLATE/bug-report.yml: two required
textareas that declare no ids, so GitHub cannot pre-fill them from a URL; the ids here are
reprobot's) and the block ``python -m torch.utils.collect_env`` prints."""
from __future__ import annotations

from typing import Any

from bot.targets.base import Target, textarea
from bot.targets.sysinfo import fields, gpu_names, install_notes, platform_of, python_of, torch_of

COLLECT_ENV = "python -m torch.utils.collect_env"
# torch/utils/collect_env.py lists installed distributions whose names contain one of these.
_COLLECT_ENV_PATTERNS = ("torch", "numpy", "triton", "optree", "mypy", "flake8", "onnx", "cuda-", "cublas",
                         "cudnn", "cufft", "curand", "cusolver", "cusparse", "nccl", "nvjitlink", "nvtx", "mkl")


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


def render(env: dict) -> str:
    """The fields of ``python -m torch.utils.collect_env`` that env.json holds, in its order and
    wording; what env.json cannot know (compilers, CPU flags) is named as missing, not invented."""
    t = torch_of(env)
    plat = env.get("platform") or {}
    gpu = env.get("gpu") or {}
    cuda = bool(t.get("cuda_available"))
    gpus = [f"GPU {i}: {name}" for i, name in enumerate(gpu_names(env))]
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
        f"Python version: {(env.get('python') or {}).get('full_version') or python_of(env)}"
        + (f" ({(env.get('python') or {}).get('bits')}-bit runtime)" if (env.get("python") or {}).get("bits") else ""),
        f"Python platform: {platform_of(env)}",
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
    return "\n".join(lines) + ("\n" + fields(extra) if extra else "")


TARGET = Target(
    recipes="pytorch.py", key="pytorch", repo="pytorch/pytorch", packages=("torch",), order=90,
    fields=(textarea("describe-the-bug", "\U0001F41B Describe the bug", required=True, prefill=False),
            textarea("versions", "Versions", required=True, prefill=False)),
    render_system_info=render, system_info_command=COLLECT_ENV,
    callee_names=("Parameter", "Tensor", "Module"),
    area_prefixes=(("torch/distributed", "distributed"),),
    checkout_parent="pytorch",
    env_packages=("numpy", "triton"),
    versions_swaps=False,
    foundation=True,
    draft_notes=("pytorch's bug form points to its AI-assisted development policy and closes reports that "
                 "do not follow it: read the draft, check it on your machine and put it in your own words "
                 "before filing; torch.compile failures have their own form (pt2-bug-report.yml)",),
)
