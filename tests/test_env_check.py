"""env --check: differences between a stored env.json and an interpreter; probe edge cases."""
from __future__ import annotations

import copy
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import main
from bot.env.check import compare, summary
from bot.env.probe import capture_env, run_probe
from reducer.errors import ExitCode, ReprobotError

STORED = {
    "python": {"version": "3.12.13", "implementation": "CPython"},
    "platform": {"system": "Linux", "machine": "x86_64", "libc": "glibc-2.35"},
    "cpu": {"count": 8},
    "torch": {"installed": True, "version": "2.8.0+cu129", "cuda_built": "12.9", "cudnn": 91002,
              "cuda_available": True, "accelerator": "CUDA"},
    "gpu": {"gpus": [{"name": "NVIDIA GeForce RTX 4090"}], "driver_version": "580.65"},
    "packages": {
        "torch": {"installed": True, "version": "2.8.0+cu129", "kind": "index", "import": "ok"},
        "accelerate": {"installed": True, "version": "1.14.0.dev0", "kind": "vcs", "commit": "a" * 40,
                       "import": "ok"},
        "transformers": {"installed": True, "version": "5.6.2", "kind": "index", "import": "ok"},
        "bitsandbytes": {"installed": True, "version": "0.49.2", "kind": "index", "import": "ok"},
        "peft": {"installed": False},
    },
    "bitsandbytes": {"library": "<env>/bitsandbytes/libbitsandbytes_cuda129.so"},
    "accelerate_config": {"found": False},
    "env_vars": {"CUDA_VISIBLE_DEVICES": "0"},
    "distributions": {"torch": "2.8.0+cu129", "accelerate": "1.14.0.dev0", "regex": "2024.1.1"},
}


def test_identical_environments_do_not_differ() -> None:
    assert compare(STORED, copy.deepcopy(STORED)) == []
    assert summary([]) == "no differences"


def test_what_a_maintainer_sees_first() -> None:
    cur = copy.deepcopy(STORED)
    cur["torch"].update(version="2.10.0+cu128", cuda_built="12.8")
    cur["packages"]["torch"]["version"] = "2.10.0+cu128"
    cur["packages"]["accelerate"].update(version="1.13.0", kind="index", commit=None)
    cur["packages"]["peft"] = {"installed": True, "version": "0.19.1", "kind": "index", "import": "ok"}
    cur["packages"]["bitsandbytes"]["import"] = "RuntimeError: CUDA Setup failed"
    cur["bitsandbytes"]["library"] = "<env>/bitsandbytes/libbitsandbytes_cuda128.so"
    cur["env_vars"] = {}
    cur["distributions"]["regex"] = "2025.1.1"
    cur["gpu"]["gpus"] = [{"name": "Tesla T4"}]
    diffs = {d.field: d for d in compare(STORED, cur)}
    assert diffs["torch"].one_line() == "torch: 2.8.0+cu129 → 2.10.0+cu128"
    assert diffs["accelerate"].one_line() == "accelerate: 1.14.0.dev0 (vcs aaaaaaaaaaaa) → 1.13.0"
    assert diffs["peft"].one_line() == "peft: absent → 0.19.1"
    assert diffs["bitsandbytes import"].current == "RuntimeError: CUDA Setup failed"
    assert diffs["torch CUDA build"].one_line() == "torch CUDA build: 12.9 → 12.8"
    assert diffs["bitsandbytes native library"].one_line() == \
        "bitsandbytes native library: libbitsandbytes_cuda129.so → libbitsandbytes_cuda128.so"
    assert diffs["$CUDA_VISIBLE_DEVICES"].one_line() == "$CUDA_VISIBLE_DEVICES: 0 → absent"
    assert diffs["regex"].group == "distributions"
    assert diffs["GPUs"].current == "Tesla T4"
    # Stack packages are not listed twice under distributions.
    assert sum(1 for d in compare(STORED, cur) if d.field == "torch") == 1
    groups = [d.group for d in compare(STORED, cur)]
    assert groups == sorted(groups, key=["python", "stack", "torch", "gpu", "bitsandbytes", "platform",
                                         "config", "env", "distributions"].index)


def test_same_version_from_another_commit_differs() -> None:
    cur = copy.deepcopy(STORED)
    cur["packages"]["accelerate"]["commit"] = "b" * 40
    (d,) = compare(STORED, cur)
    assert d.one_line() == "accelerate: 1.14.0.dev0 (vcs aaaaaaaaaaaa) → 1.14.0.dev0 (vcs bbbbbbbbbbbb)"


def test_check_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["env", "--check", str(tmp_path)]) == ExitCode.FILE_MISSING
    (tmp_path / "env.json").write_text("{not json")
    assert main(["env", "--check", str(tmp_path)]) == ExitCode.BAD_INPUT
    (tmp_path / "env.json").write_text(json.dumps({"hello": 1}))
    assert main(["env", "--check", str(tmp_path)]) == ExitCode.BAD_INPUT
    assert main(["env", "--python", str(tmp_path / "nope"), "--out", str(tmp_path)]) == ExitCode.NO_INTERPRETER
    assert main(["env", str(tmp_path)]) == ExitCode.BAD_INPUT  # not a repro folder
    assert main(["env", "--check", str(tmp_path), "--out", str(tmp_path)]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "no env.json there" in err and "not an env.json written by reprobot" in err


def test_an_executable_that_is_not_python(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho nope >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ReprobotError) as e:
        run_probe(str(fake))
    assert e.value.exit_code == ExitCode.NO_INTERPRETER
    assert "probe failed to start" in e.value.message and "nope" in e.value.message


def _python39() -> str | None:
    cands = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")))
    cands += [p for p in [shutil.which("python3.9")] if p]
    for cand in cands:  # a pyenv shim for a version not selected exits 127: not usable
        if subprocess.run([cand, "-c", "import sys; assert sys.version_info[:2] == (3, 9)"],
                          capture_output=True).returncode == 0:
            return cand
    return None


@pytest.mark.skipif(_python39() is None, reason="no Python 3.9 on this machine")
def test_probe_works_on_python_39() -> None:
    env = capture_env(_python39())
    assert env["python"]["version"].startswith("3.9.")
    assert "probe_errors" not in env
    assert env["packages"]["torch"] == {"installed": False}
    assert env["distributions"]  # pip at least


def test_probe_only_and_module_map_in_reprobots_interpreter() -> None:
    raw = run_probe(sys.executable, sections=["python", "module_map"], modules=["libcst", "rich.console", "json"])
    assert set(raw) == {"python", "module_map"}
    assert raw["module_map"]["libcst"] == ["libcst"]
    assert raw["module_map"]["rich"] == ["rich"]
    assert "json" not in raw["module_map"]  # stdlib
