"""env.json and System Info keep only what a maintainer needs (bot/env/privacy.py), from a real
probe of a real virtualenv: one named after a person, holding private distributions and public
ones installed from private places, run on a machine whose distributed address, accelerate
config and library path name the company's network.

The distributions are written as their metadata (what pip leaves in site-packages: METADATA,
INSTALLER and PEP 610's direct_url.json), so nothing is downloaded or built.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.env.privacy import PRIVATE_PACKAGE, environment_kind, private_distribution
from bot.env.probe import write_env
from bot.env.system_info import system_info
from bot.store import ReproDir
from bot.targets import targets

PERSON = "tdelacroix"
VENV_NAME = f"{PERSON}-lora-exp"
FORK_COMMIT = "9f3c2a71e4b8d05c6a1f7e2d3b4c5a6978e1d2c3"

# name, version, direct_url.json (None: installed from an index)
DISTRIBUTIONS = [
    ("acme-torch-kernels", "3.1.4+internal", None),                               # a local label: not on PyPI
    ("acmeresearch-train-utils", "0.2.0", {"url": "file:///home/tdelacroix/src/acmeresearch-train-utils",
                                           "dir_info": {"editable": True}}),      # the person's own checkout
    ("peft", "0.13.0", {"url": "https://github.com/acme-internal/peft-lowrank-fork.git",
                        "vcs_info": {"vcs": "git", "commit_id": FORK_COMMIT, "requested_revision": "alice/fix-lora"}}),
    ("transformers", "4.99.0.dev0", {"url": "https://github.com/huggingface/transformers",
                                     "vcs_info": {"vcs": "git", "commit_id": "0123456789abcdef0123456789abcdef01234567"}}),
    ("bitsandbytes", "0.45.0", {"url": "https://wheels.evil.example/acme/bitsandbytes-0.45.0-py3-none-any.whl",
                                "archive_info": {"hash": "sha256=" + "0" * 64}}),
    ("torchvision", "0.24.0+cu130", None),                                        # PyTorch's index: public
    ("flash-attn", "2.6.3", {"url": "https://github.com/Dao-AILab/flash-attention",
                             "vcs_info": {"vcs": "git", "commit_id": "1" * 40}}),  # an upstream project
    ("acme-index-only", "1.0.0", None),          # a private index's release: cannot be told offline
]
MACHINE = "gpu-node-17.acmeresearch42.net"
PUBLIC_IP = "34.90.12.7"


def _dist_info(site: Path, name: str, version: str, direct_url: dict | None) -> None:
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    (folder / "INSTALLER").write_text("pip\n", encoding="utf-8")
    (folder / "RECORD").write_text("", encoding="utf-8")
    if direct_url is not None:
        (folder / "direct_url.json").write_text(json.dumps(direct_url), encoding="utf-8")


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Path]:
    """env.json of the person's venv, as `reprobot env` writes it, and its text."""
    home = tmp_path_factory.mktemp("privacy") / "home" / PERSON
    venv = home / "envs" / VENV_NAME
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    for name, version, direct in DISTRIBUTIONS:
        _dist_info(site, name, version, direct)
    hf_home = home / "hf"
    (hf_home / "accelerate").mkdir(parents=True)
    (hf_home / "accelerate" / "default_config.yaml").write_text(
        f"compute_environment: LOCAL_MACHINE\nmain_process_ip: {PUBLIC_IP}\nmain_process_port: 29500\n"
        f"deepspeed_hostfile: /home/{PERSON}/hostfile\nnum_machines: 2\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        for name in ("CUDA_HOME", "CUDA_PATH", "HF_HUB_CACHE", "TRANSFORMERS_CACHE", "PYTHONPATH"):
            mp.delenv(name, raising=False)
        mp.setenv("HF_HOME", str(hf_home))
        mp.setenv("MASTER_ADDR", MACHINE)
        mp.setenv("MASTER_PORT", "29500")
        mp.setenv("LD_LIBRARY_PATH", f"{venv}/lib:/usr/lib/x86_64-linux-gnu")
        repro = ReproDir(home / "repro")
        env = write_env(repro, str(python))
    return env, repro.env_json.read_text(encoding="utf-8"), venv


def test_nothing_that_names_the_person_the_company_or_its_network(captured: tuple[dict, str, Path]) -> None:
    env, text, venv = captured
    for private in (VENV_NAME, str(venv), "acme-torch-kernels", "acmeresearch-train-utils", "acme-internal",
                    "peft-lowrank-fork", "alice/fix-lora", "wheels.evil.example", "gpu-node-17", "acmeresearch42",
                    PUBLIC_IP, f"{PERSON}/hostfile", "~/hostfile"):
        assert private not in text, private
    # the same for every target's System Info, which is built from it
    for target in targets():
        block = system_info(env, target.key)
        for private in ("acme-torch-kernels", "acmeresearch-train-utils", VENV_NAME, "gpu-node-17", "evil"):
            assert private not in block, (target.key, private)


def test_the_interpreter_is_named_by_its_kind(captured: tuple[dict, str, Path]) -> None:
    env, _, _ = captured
    assert env["python"]["environment"] == "venv"
    assert not {"executable", "prefix", "base_prefix"} & set(env["python"])
    assert env["tools"]["scripts_dir"] == "<venv>/bin"
    assert env["env_vars"]["LD_LIBRARY_PATH"] == "<venv>/lib:/usr/lib/x86_64-linux-gnu"


def test_machines_are_named_as_hosts(captured: tuple[dict, str, Path]) -> None:
    env, _, _ = captured
    assert env["env_vars"]["MASTER_ADDR"] == "<host>" and env["env_vars"]["MASTER_PORT"] == "29500"
    raw = env["accelerate_config"]["raw"]   # accelerate and yaml are not in the person's venv
    assert "main_process_ip: <host>" in raw and "main_process_port: 29500" in raw and "num_machines: 2" in raw


def test_private_distributions_are_named_as_such_and_public_ones_by_name(captured: tuple[dict, str, Path]) -> None:
    env, _, _ = captured
    dists = env["distributions"]
    private = {k: v for k, v in dists.items() if k.startswith(PRIVATE_PACKAGE)}
    # numbered in the order of their (never written) names: acme-torch-kernels, acmeresearch-train-utils
    assert private == {f"{PRIVATE_PACKAGE} #1": "3.1.4+<local>", f"{PRIVATE_PACKAGE} #2": "0.2.0"}
    assert dists["torchvision"] == "0.24.0+cu130" and dists["flash-attn"] == "2.6.3"
    assert dists["acme-index-only"] == "1.0.0"   # the documented limit: an index install with no local label
    # stack packages keep their names; where a private one came from is not recorded
    peft = env["packages"]["peft"]
    assert peft["kind"] == "vcs" and peft["private_source"] is True
    assert "url" not in peft and "requested_revision" not in peft
    assert env["packages"]["transformers"]["url"] == "https://github.com/huggingface/transformers"
    bnb = env["packages"]["bitsandbytes"]
    assert bnb["kind"] == "archive" and bnb["private_source"] is True and "url" not in bnb
    collect_env = system_info(env, "pytorch")
    assert "[pip3] torchvision==0.24.0+cu130" in collect_env


@pytest.mark.parametrize("python,kind", [
    ({"virtualenv": True, "conda": True}, "venv"), ({"virtualenv": False, "conda": True}, "conda env"),
    ({"virtualenv": False, "conda": False}, "system"),
])
def test_environment_kinds(python: dict, kind: str) -> None:
    assert environment_kind(python) == kind


@pytest.mark.parametrize("info,private", [
    ({"name": "acme-kernels", "version": "3.1.4+internal", "kind": "index"}, True),
    ({"name": "torch", "version": "2.9.0+cu130", "kind": "index"}, False),
    ({"name": "torchaudio", "version": "2.9.0+rocm6.4", "kind": "index"}, False),
    ({"name": "jaxlib", "version": "0.4.30+cuda12.cudnn89", "kind": "index"}, False),
    ({"name": "my-project", "version": "0.1.0", "kind": "editable", "url": "file:///home/x/p"}, True),
    ({"name": "lib", "version": "1.0", "kind": "vcs", "url": "https://github.com/huggingface/lib"}, False),
    ({"name": "lib", "version": "1.0", "kind": "vcs", "url": "git+ssh://git@github.com/acme/lib.git"}, True),
    ({"name": "peft", "version": "0.13.0", "kind": "vcs", "url": "https://github.com/acme/peft"}, False),
    ({"name": "wheel-from-web", "version": "1.0", "kind": "archive", "url": "https://x.example/w.whl"}, True),
    # a release's own wheel carried onto a machine with no network (the GPU example's bitsandbytes)
    ({"name": "bitsandbytes", "version": "0.49.0", "kind": "archive",
      "url": "file:///tmp/w/bitsandbytes-0.49.0-py3-none-manylinux_2_24_x86_64.whl"}, False),
    ({"name": "bitsandbytes", "version": "0.49.0", "kind": "archive",
      "url": "https://wheels.evil.example/bitsandbytes-0.49.0-py3-none-any.whl"}, True),
    ({"name": "acme", "version": "1.0", "kind": "archive", "url": "file:///tmp/w/acme-1.0+x-py3-none-any.whl"}, True),
    ({"name": "from-conda", "version": "1.0", "kind": "conda"}, False),
])
def test_the_private_distribution_rule(info: dict, private: bool) -> None:
    assert private_distribution(info, known=("peft", "torch")) is private
