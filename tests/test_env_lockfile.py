"""Lockfile pieces that need no virtualenv: pins, torch's index, the closure, the launcher."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.env.lockfile import (MODULES_ENV, Dist, Environment, find_imported_modules,
                          torch_index)
from reducer.errors import ExitCode, ReprobotError

MARKERS_311 = {"implementation_name": "cpython", "implementation_version": "3.11.7", "os_name": "posix",
               "platform_machine": "x86_64", "platform_release": "6.1", "platform_system": "Linux",
               "platform_version": "#1", "python_full_version": "3.11.7",
               "platform_python_implementation": "CPython", "python_version": "3.11", "sys_platform": "linux"}


def test_pins_per_install_kind() -> None:
    """Only an index release is installable; a VCS reference, an archive URL or a local folder or
    file the reporter chose is named (name and version), never written as a line pip would follow."""
    private = "installed from a private source: not installable from here"
    assert Dist("numpy", "2.0.2").pin() == "numpy==2.0.2"
    vcs = Dist("accelerate", "1.14.0.dev0", kind="vcs", vcs="git", url="https://github.com/huggingface/accelerate",
               commit="a" * 40)
    assert vcs.pin() == f"# accelerate==1.14.0.dev0  ({private})"
    assert not vcs.hashable and vcs.private_source
    sub = Dist("pkg", "1", kind="vcs", vcs="git", url="https://example.org/r.git", commit="b" * 40,
               subdirectory="python")
    assert sub.pin() == f"# pkg==1  ({private})"
    remote = Dist("wheelpkg", "1.0", kind="archive", url="https://wheels.evil.example/wheelpkg-1.0-py3-none-any.whl")
    assert remote.pin() == f"# wheelpkg==1.0  ({private})" and not remote.hashable
    edit = Dist("peft", "0.20.0.dev0", kind="editable", url="file:///home/alice/src/peft")
    assert edit.pin() == f"# peft==0.20.0.dev0  ({private})"
    # A release wheel carried onto a machine without network (bitsandbytes on the GPU device): the
    # index has the same file, so it is pinned as a release, and its folder is never shown.
    carried = Dist("bitsandbytes", "0.50.2", kind="archive",
                   url="file:///work/main/.whl/bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl")
    assert carried.pin() == "bitsandbytes==0.50.2" and carried.hashable and not carried.private_source
    built = Dist("bitsandbytes", "0.50.2", kind="archive", url="file:///tmp/dist/bitsandbytes-0.51.0.dev0-py3-none-any.whl")
    assert built.pin() == f"# bitsandbytes==0.50.2  ({private})"
    assert not built.hashable
    assert Dist("x", "1", kind="conda", installer="conda").hashable


@pytest.mark.parametrize("version, index", [
    ("2.8.0+cu129", "https://download.pytorch.org/whl/cu129"),
    ("2.10.0+cu128", "https://download.pytorch.org/whl/cu128"),
    ("2.13.0+cpu", "https://download.pytorch.org/whl/cpu"),
    ("2.5.1+rocm6.2", "https://download.pytorch.org/whl/rocm6.2"),
    ("2.8.0", None),                 # PyPI's own build
    ("2.8.0+gitabc123", None),       # a source build: no index to name
])
def test_torch_index_from_the_local_tag(version: str, index: str | None) -> None:
    assert torch_index([Dist("numpy", "2.0"), Dist("torch", version)]) == index


def _env(dists: list[Dist], module_map: dict[str, list[str]] | None = None) -> Environment:
    return Environment(dists={d.key: d for d in dists}, markers=MARKERS_311, python_version="3.11.7",
                       module_map=module_map or {})


def test_closure_follows_markers_and_extras() -> None:
    env = _env([
        Dist("transformers", "5.6.2", requires=("huggingface-hub>=1.0", "numpy>=1.17",
                                                "torch>=2.2; extra == 'torch'", "tzdata; sys_platform == 'win32'",
                                                "tomli; python_version < '3.11'")),
        Dist("huggingface_hub", "1.12.0", requires=("filelock", "hf-xet; platform_machine == 'x86_64'")),
        Dist("hf-xet", "1.1.0"), Dist("filelock", "3.20.0"), Dist("numpy", "2.0.2"),
        Dist("torch", "2.10.0+cu128", requires=("filelock",)), Dist("tzdata", "2025.1"), Dist("tomli", "2.0"),
        Dist("peft", "0.19.1", requires=("transformers[torch]", "missingdep>=1")),
    ])
    closure, missing = env.closure([env.dists["transformers"]])
    assert [d.key for d in closure] == ["filelock", "hf-xet", "huggingface-hub", "numpy", "transformers"]
    assert missing == []
    # peft asks for transformers[torch]: the extra pulls torch in.
    closure, missing = env.closure([env.dists["peft"]])
    assert "torch" in [d.key for d in closure]
    assert "tzdata" not in [d.key for d in closure] and "tomli" not in [d.key for d in closure]
    assert missing == ["missingdep (required by peft)"]


def test_roots_are_the_imported_distributions() -> None:
    env = _env([Dist("PyYAML", "6.0.2"), Dist("pip", "24.0"), Dist("numpy", "2.0.2")],
               {"yaml": ["PyYAML"], "_yaml": ["PyYAML"], "pip": ["pip"], "numpy": ["numpy"]})
    roots = env.roots_for(["yaml", "yaml.loader", "_yaml", "pip", "local_helper", "numpy.linalg"])
    assert [d.name for d in roots] == ["numpy", "PyYAML"]


def test_every_run_records_its_modules_and_keeps_the_failure(tmp_path: Path) -> None:
    """The recorder rides along any run (reducer/run/exception_hook/sitecustomize.py): the
    script's own failure and exit are unchanged, its top-level modules are written at exit."""
    (tmp_path / "helper_mod.py").write_text("VALUE = 1\n")
    script = tmp_path / "main.py"
    script.write_text("import sys, email.parser, helper_mod\nprint(sys.argv[1:], __name__)\nraise KeyError(22)\n")
    mods = find_imported_modules(sys.executable, script, ("arg1",))
    assert "email" in mods and "helper_mod" in mods
    assert "email.parser" not in mods  # top-level names only
    assert mods == sorted(mods)
    from reducer.failure.signature import distinct_failures
    from reducer.run.runner import Runner, RunSpec
    runner = Runner(RunSpec(script=script, args=("arg1",), timeout=60))
    plain = runner.run(script.read_text())
    recorded = runner.run(script.read_text(), extra_env={MODULES_ENV: str(tmp_path / "m.jsonl")})
    assert "['arg1'] __main__" in recorded.stdout and recorded.returncode == plain.returncode == 1
    assert distinct_failures(plain)[0][0] == distinct_failures(recorded)[0][0]


def test_a_script_that_exits_records_its_modules(tmp_path: Path) -> None:
    script = tmp_path / "r.py"
    script.write_text("import json\nraise SystemExit(3)\n")
    assert "json" in find_imported_modules(sys.executable, script)


def test_find_imported_modules_runs_a_scratch_copy(tmp_path: Path) -> None:
    (tmp_path / "sibling.py").write_text("import csv\n")
    script = tmp_path / "repro.py"
    script.write_text("import sibling\nopen('written-here.txt', 'w').write('x')\nraise ValueError('boom')\n")
    mods = find_imported_modules(sys.executable, script)
    assert {"sibling", "csv"} <= set(mods)
    assert not (tmp_path / "written-here.txt").exists()  # ran in the copy, not the user's folder


def test_find_imported_modules_sees_a_package_on_pythonpath(tmp_path: Path, monkeypatch) -> None:
    """A package installed with `pip install --target` and put on PYTHONPATH is imported by the
    repro as in its runs, so it is a root of the lock."""
    target = tmp_path / "site"
    (target / "targetpkg").mkdir(parents=True)
    (target / "targetpkg" / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(target))
    (tmp_path / "work").mkdir()
    script = tmp_path / "work" / "repro.py"
    script.write_text("import targetpkg\nraise ValueError('boom')\n")
    assert "targetpkg" in find_imported_modules(sys.executable, script)


def test_find_imported_modules_errors(tmp_path: Path) -> None:
    with pytest.raises(ReprobotError) as e:
        find_imported_modules(sys.executable, tmp_path / "nope.py")
    assert e.value.exit_code == ExitCode.FILE_MISSING
    script = tmp_path / "r.py"
    script.write_text("import time\ntime.sleep(30)\n")
    with pytest.raises(ReprobotError) as e:
        find_imported_modules(sys.executable, script, timeout=1)
    assert e.value.exit_code == ExitCode.BAD_INPUT
    with pytest.raises(ReprobotError) as e:
        find_imported_modules(str(tmp_path / "no-python"), script)
    assert e.value.exit_code == ExitCode.NO_INTERPRETER


@pytest.mark.slow
def test_torch_build_records_its_index(tmp_path: Path) -> None:
    # reprobot's own interpreter has a local-tagged torch (2.x+cpu in the test environment).
    from importlib.metadata import version

    from bot.env.lockfile import write_lock
    from bot.store import ReproDir
    tv = version("torch")
    if "+" not in tv:
        pytest.skip(f"torch {tv} has no local build tag here")
    index = "https://download.pytorch.org/whl/" + tv.split("+", 1)[1]
    repro = ReproDir(tmp_path / "r")
    repro.path.mkdir()
    repro.repro.write_text("import torch\n")
    result = write_lock(repro, sys.executable, ["torch", "torch.nn"])
    assert result.roots == ["torch"]
    assert index in result.index_urls
    assert f"--extra-index-url {index}" in repro.requirements_in.read_text().splitlines()
    assert f"torch=={tv}" in repro.requirements_in.read_text().splitlines()
    lock = repro.requirements_lock.read_text()
    # Compiled where that index is reachable; else a snapshot that says why, and still names it.
    assert f"--extra-index-url {index}" in lock.splitlines()
    if result.mode == "snapshot":
        assert lock.startswith("# requirements.lock — SNAPSHOT, NOT COMPILED: ")
        assert f"torch=={tv}" in lock.splitlines()
    else:
        assert f"torch=={tv} \\" in lock.splitlines()


@pytest.mark.slow
def test_index_package_depending_on_a_vcs_install_still_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    # python-dateutil (from the index) needs six, here installed from git at a dev version: the
    # hashed part gets the closest release of six not above it, so --require-hashes can install.
    from bot.env.lockfile import DEFAULT_INDEX, compile_lock, index_reachable
    reason = index_reachable(DEFAULT_INDEX)
    assert reason is None, f"this test needs PyPI: {reason}"
    dateutil = Dist("python-dateutil", "2.9.0.post0", requires=("six>=1.5",))
    six = Dist("six", "1.17.1.dev0", kind="vcs", vcs="git", url="https://example.invalid/six", commit="c" * 40)
    text = compile_lock([dateutil], [dateutil, six], DEFAULT_INDEX, None, timeout=300)
    lines = text.splitlines()
    assert "python-dateutil==2.9.0.post0 \\" in lines
    assert "six==1.17.0 \\" in lines
    assert "example.invalid" not in text


def test_a_script_that_outlives_the_module_probe_takes_its_workers_with_it(tmp_path: Path) -> None:
    import os
    import time
    pidfile = tmp_path / "worker.pid"
    script = tmp_path / "serve.py"
    script.write_text(
        "import os, subprocess, sys, time\n"
        "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(w.pid))\n"
        "time.sleep(60)\n", encoding="utf-8")
    with pytest.raises(ReprobotError, match="could not record the modules"):
        find_imported_modules(sys.executable, script, timeout=3)
    worker = int(pidfile.read_text())
    for _ in range(50):     # the kill is sent; give the kernel a moment to reap
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        if open(f"/proc/{worker}/stat").read().split(") ")[1].startswith("Z"):
            break           # a zombie waiting for its (also killed) parent's reaper: dead
        time.sleep(0.1)
    else:
        pytest.fail("the script's worker outlived the module probe")
