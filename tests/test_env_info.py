"""System Info blocks: field by field against what the real commands print, and their shapes."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.env.system_info import system_info
from bot.env.probe import capture_env
from bot.scrub import scrub
from reducer.errors import ExitCode, ReprobotError

BIN = Path(sys.executable).parent


def _has(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


def fields(text: str) -> dict[str, str]:
    """'- key: value' lines; tab-indented lines continue the previous value (accelerate's config)."""
    out: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        m = re.match(r"^- (.+?): ?(.*)$", line)
        if m:
            key = m.group(1)
            out[key] = m.group(2)
        elif line.startswith("\t") and key:
            out[key] = (out[key] + "\n" + line).lstrip("\n") if out[key] else line
    return out


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An HF_HOME with an accelerate default config written by accelerate itself."""
    home = tmp_path_factory.mktemp("hfhome")
    env = dict(os.environ, HF_HOME=str(home), PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    subprocess.run([str(BIN / "accelerate"), "config", "default"], env=env, check=True, capture_output=True)
    assert (home / "accelerate" / "default_config.yaml").is_file()
    return env


@pytest.fixture(scope="module")
def real_env(hf_home: dict[str, str]) -> dict:
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HOME", hf_home["HF_HOME"])
    mp.setenv("PATH", hf_home["PATH"])
    try:
        return capture_env(sys.executable)
    finally:
        mp.undo()


def _run(cmd: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"{' '.join(cmd)} does not work here: {proc.stderr.strip().splitlines()[-1:]}")
    return scrub(proc.stdout).text


@pytest.mark.slow
@pytest.mark.skipif(not (BIN / "accelerate").exists(), reason="accelerate not installed")
def test_accelerate_block_matches_accelerate_env(real_env: dict, hf_home: dict[str, str]) -> None:
    real = fields(_run([str(BIN / "accelerate"), "env"], hf_home))
    # Where the command lives is said by the kind of environment (bot/env/privacy.py), never its path.
    kind = "<venv>" if sys.prefix != sys.base_prefix else "<system python>"
    real["`accelerate` bash location"] = real["`accelerate` bash location"].replace(sys.prefix, kind)
    assert real["`accelerate` bash location"] == f"{kind}/bin/accelerate"
    ours_text = system_info(real_env, "accelerate")
    ours = fields(ours_text)
    assert len(real) >= 9
    for key, value in real.items():
        assert ours.get(key) == value, f"{key}: ours {ours.get(key)!r} vs accelerate env {value!r}"
    # The command's fields come first and in its order; nothing of ours is interleaved.
    assert list(ours)[:len(real)] == list(real)
    assert "\t- compute_environment: LOCAL_MACHINE" in ours_text


@pytest.mark.slow
@pytest.mark.skipif(not (BIN / "transformers").exists(), reason="transformers not installed")
def test_transformers_block_matches_transformers_env(real_env: dict, hf_home: dict[str, str]) -> None:
    real = fields(_run([str(BIN / "transformers"), "env"], hf_home))
    ours = fields(system_info(real_env, "transformers"))
    assert "`transformers` version" in real
    for key, value in real.items():
        assert ours.get(key) == value, f"{key}: ours {ours.get(key)!r} vs transformers env {value!r}"
    assert list(ours)[:len(real)] == list(real)


@pytest.mark.slow
def test_peft_and_bitsandbytes_blocks_from_the_real_env(real_env: dict) -> None:
    import platform
    peft = fields(system_info(real_env, "peft"))
    for name in ("peft", "transformers", "accelerate"):
        expected = _version(name)
        assert peft[f"{name} version"] == expected
    assert peft["torch version"].startswith(_version("torch"))
    assert peft["Platform"] == platform.platform()
    assert peft["Python version"] == platform.python_version()
    bnb = system_info(real_env, "bitsandbytes").splitlines()
    installed = _has("bitsandbytes")
    assert bnb[0].strip("=").strip() == (f"bitsandbytes v{_version('bitsandbytes')}" if installed
                                         else "bitsandbytes (not installed)")
    assert len(bnb[0]) == 60
    assert f"  transformers: {_version('transformers')}" in bnb
    assert "  diffusers: " + (_version("diffusers") if _has("diffusers") else "not found") in bnb


def _version(name: str) -> str:
    from importlib.metadata import version
    return version(name)


# --- recorded on a GPU machine (H100, torch 2.11.0+cu130, Python 3.12): the probe's raw output
# and what `accelerate env` / `transformers env` printed there, without and with a default config.
H100 = Path(__file__).parent / "data" / "env" / "h100-cu130"


def _recorded_env(name: str) -> dict:
    from bot.env.probe import shape_env
    from bot.scrub import scrub_tree
    raw = {}
    for line in (H100 / name).read_text().splitlines():
        rec = json.loads(line)
        raw[rec["section"]] = rec["data"]
    return scrub_tree(shape_env(raw))


@pytest.mark.parametrize("probe, suffix", [("probe.jsonl", ""), ("probe_cfg.jsonl", "_cfg")])
@pytest.mark.parametrize("repo", ["accelerate", "transformers"])
def test_blocks_match_the_commands_on_a_gpu_machine(probe: str, suffix: str, repo: str) -> None:
    env = _recorded_env(probe)
    real = fields(scrub((H100 / f"{repo}_env{suffix}.txt").read_text()).text)
    ours = fields(system_info(env, repo))
    assert real["GPU type"] == "NVIDIA H100 80GB HBM3"
    for key, value in real.items():
        assert ours.get(key) == value, f"{key}: ours {ours.get(key)!r} vs {repo} env {value!r}"
    assert list(ours)[:len(real)] == list(real)


def test_gpu_details_recorded_on_a_gpu_machine() -> None:
    env = _recorded_env("probe_cfg.jsonl")
    assert env["torch"]["cuda_built"] == "13.0" and env["torch"]["local_tag"] == "cu130"
    assert env["torch"]["cudnn"] == 91900 and env["torch"]["cuda_available"] is True
    assert env["gpu"]["driver_version"] == "580.159.04"
    assert env["gpu"]["gpus"][0]["memory_bytes"] == 81559 * 1024 * 1024
    bnb = system_info(env, "bitsandbytes").splitlines()
    assert "PyTorch settings found: CUDA_VERSION=130, Highest Compute Capability: (9, 0)." in bnb


# --- shapes on recorded environments (no commands needed) ------------------------------------

CUDA_ENV = {
    "python": {"version": "3.12.13"},
    "platform": {"platform": "Linux-6.1.123+-x86_64-with-glibc2.35", "system": "Linux", "libc": "glibc-2.35"},
    "memory": {"total_bytes": 13609431040},
    "torch": {"installed": True, "version": "2.10.0+cu128", "cuda_built": "12.8", "hip_built": None,
              "xpu_built": None, "cudnn": 91002, "cuda_available": True, "accelerator": "CUDA",
              "devices": [{"name": "Tesla T4", "memory_bytes": 15828320256, "capability": "7.5"}]},
    "gpu": {"gpus": [{"name": "Tesla T4", "memory_bytes": 16106127360, "driver_version": "550.54.15"}],
            "driver_version": "550.54.15"},
    "packages": {
        "transformers": {"installed": True, "version": "5.6.2", "kind": "index", "import": "ok"},
        "accelerate": {"installed": True, "version": "1.14.0.dev0", "kind": "vcs", "vcs": "git",
                       "url": "https://github.com/huggingface/accelerate", "commit": "0123456789abcdef0123",
                       "import": "ok"},
        "peft": {"installed": True, "version": "0.19.1", "kind": "index", "import": "ok"},
        "bitsandbytes": {"installed": True, "version": "0.49.2", "kind": "index", "import": "ok"},
        "huggingface_hub": {"installed": True, "version": "1.12.0", "kind": "index"},
        "safetensors": {"installed": True, "version": "0.7.0", "kind": "index"},
        "numpy": {"installed": True, "version": "2.0.2", "kind": "index"},
        "deepspeed": {"installed": False},
    },
    "bitsandbytes": {"installed": True, "version": "0.49.2", "backend": "CUDA",
                     "library": "<env>/bitsandbytes/libbitsandbytes_cuda128.so"},
    "accelerate_config": {"found": False},
    "tools": {"accelerate_cli": "/usr/local/bin/accelerate"},
}


def test_transformers_block_on_a_gpu_machine() -> None:
    f = fields(system_info(CUDA_ENV, "transformers"))
    assert f["PyTorch version (accelerator?)"] == "2.10.0+cu128 (CUDA)"
    assert f["Using GPU in script?"] == "<fill in>"
    assert f["GPU type"] == "Tesla T4"
    assert f["Accelerate config"] == "\tnot found"
    assert f["DeepSpeed version"] == "not installed"
    # What the command does not say: accelerate came from git, named without the URL a maintainer
    # would otherwise be told to install from.
    assert f["accelerate installed from"] == ("a private source (a VCS checkout), version 1.14.0.dev0; "
                                              "not installable from here")
    assert f["PyTorch built with"] == "CUDA 12.8, cuDNN 91002"
    assert f["NVIDIA driver"] == "550.54.15"


def test_a_local_wheel_or_checkout_is_named_without_where_it_sits() -> None:
    """A bitsandbytes wheel carried onto a machine (file:///work/main/.whl/...) showed its folder in
    the GPU example's draft: a maintainer needs to know it is not an index release, never where
    it sits (nor its file name, which is the reporter's too)."""
    env = json.loads(json.dumps(CUDA_ENV))
    env["packages"]["bitsandbytes"].update(kind="archive", url="file:///srv/alice-team/.whl/bitsandbytes-0.50.2-py3-none-any.whl")
    env["packages"]["peft"].update(kind="editable", url="file:///srv/alice-team/src/peft")
    f = fields(system_info(env, "transformers"))
    assert f["bitsandbytes installed from"] == ("a private source (an archive), version 0.49.2; "
                                                "not installable from here")
    assert f["peft installed from"] == "a private source (an editable folder), version 0.19.1; not installable from here"
    assert "alice" not in system_info(env, "transformers") and ".whl" not in system_info(env, "transformers")
    # The index's own release carried as a file (same name and version) is no private source.
    env["packages"]["bitsandbytes"].update(version="0.50.2")
    assert "bitsandbytes installed from" not in fields(system_info(env, "transformers"))


def test_accelerate_block_on_a_gpu_machine() -> None:
    text = system_info(CUDA_ENV, "accelerate")
    f = fields(text)
    assert f["PyTorch accelerator"] == "CUDA"
    assert f["GPU type"] == "Tesla T4"
    assert f["System RAM"] == "12.67 GB"
    assert text.splitlines()[list(f).index("`Accelerate` default config") + 1] == "\tNot found"


def test_bitsandbytes_block_names_the_loaded_library() -> None:
    lines = system_info(CUDA_ENV, "bitsandbytes").splitlines()
    assert lines[0] == "=" * 19 + " bitsandbytes v0.49.2 " + "=" * 19
    assert "  CUDA: 12.8" in lines and "  HIP: N/A" in lines and "  libc: glibc-2.35" in lines
    assert "Native library loaded: <env>/bitsandbytes/libbitsandbytes_cuda128.so" in lines
    assert "PyTorch settings found: CUDA_VERSION=128, Highest Compute Capability: (7, 5)." in lines


def test_peft_block_lists_what_the_form_asks_for() -> None:
    f = fields(system_info(CUDA_ENV, "peft"))
    assert f["peft version"] == "0.19.1"
    assert f["transformers version"] == "5.6.2"
    assert f["accelerate version"] == "1.14.0.dev0"
    assert f["torch version"] == "2.10.0+cu128 (accelerator: CUDA)"
    assert f["bitsandbytes version"] == "0.49.2"
    assert f["Python version"] == "3.12.13"


def test_failed_import_is_shown() -> None:
    env = {**CUDA_ENV, "packages": {**CUDA_ENV["packages"], "peft": {
        "installed": True, "version": "0.19.1", "kind": "index", "import": "ImportError: cannot import name 'x'"}}}
    f = fields(system_info(env, "peft"))
    assert f["peft import"] == "FAILED (ImportError: cannot import name 'x')"


def test_an_empty_environment_still_renders() -> None:
    for key in ("transformers", "peft", "accelerate", "bitsandbytes"):
        assert "not installed" in system_info({}, key)


def test_unknown_repo_key() -> None:
    with pytest.raises(ReprobotError) as e:
        system_info(CUDA_ENV, "diffusers")
    assert e.value.exit_code == ExitCode.USAGE
