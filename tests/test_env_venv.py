"""The probe and the lockfile against a real user virtualenv, separate from reprobot's own.

One venv per module (built once: ~15 s) holds what the issue asks to exercise: a package from
PyPI whose misuse raises (python-dateutil, which depends on six), a package installed from a
local git repository (PEP 610 vcs_info), an editable install, and two deliberately broken
stand-ins for stack packages: a `safetensors` whose import raises and a `tokenizers` whose
import kills the interpreter (segfault), plus a `numpy` that hangs when asked to.
"""
from __future__ import annotations

import _json
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.cli import main
from bot.env.probe import capture_env, run_probe, write_env
from bot.env.lockfile import index_reachable, write_lock
from bot.store import ReproDir
from reducer.failure.signature import distinct_failures
from reducer.run.runner import Runner, RunSpec

pytestmark = pytest.mark.slow

DATEUTIL = "2.9.0.post0"
REPRO = '''\
from dateutil import parser

parser.parse("not a date at all")
'''


@dataclass
class UserVenv:
    python: str
    git_repo: Path
    commit: str
    edit_dir: Path


def _pkg(root: Path, name: str, body: str, deps: tuple[str, ...] = (), version: str = "0.1.0") -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(body)
    dep_list = ", ".join(f'"{d}"' for d in deps)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = [{dep_list}]\n'
        f'[tool.setuptools]\npackages = ["{name}"]\n')
    return root


def _git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _make_venv(path: Path) -> str:
    # Without pip (seconds instead of a minute on a slow disk): reprobot's pip installs into it
    # with --python, which is also how a user's pip-less environment would be filled.
    venv.EnvBuilder(with_pip=False).create(path)
    return str(path / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))


def _pip(python: str, *args: str, clean: bool = False) -> None:
    env = _pip_env() if clean else None
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q",
                           "--disable-pip-version-check", *args], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def user_venv() -> UserVenv:
    # Under /tmp directly (not pytest's per-user folder) so the git URL holds no user name.
    root = Path(tempfile.mkdtemp(prefix="reprobot-uservenv-"))
    try:
        gitpkg = _pkg(root / "gitpkg", "tinyvcs", 'def hello():\n    return "hi"\n', deps=("six",))
        _git(gitpkg, "init", "-q")
        _git(gitpkg, "add", "-A")
        _git(gitpkg, "commit", "-q", "-m", "init")
        commit = _git(gitpkg, "rev-parse", "HEAD")
        editpkg = _pkg(root / "editpkg", "tinyedit", "X = 1\n")
        broken = _pkg(root / "fake_safetensors", "safetensors",
                      'raise ImportError("broken on purpose")\n', version="0.0.1")
        crashing = _pkg(root / "fake_tokenizers", "tokenizers",
                        "import ctypes\nctypes.string_at(0)\n", version="0.0.1")
        hanging = _pkg(root / "fake_numpy", "numpy",
                       'import os, time\nif os.environ.get("FAKE_NUMPY_HANG"):\n    time.sleep(120)\n'
                       '__version__ = "0.0.1"\n', version="0.0.1")
        # A bitsandbytes stand-in shaped like the real one (cextension.lib wraps a ctypes CDLL in
        # BNBNativeLibrary._lib; bitsandbytes/cextension.py), loading a real shared object.
        bnb = _pkg(root / "fake_bnb", "bitsandbytes", '__version__ = "0.0.1"\n', version="0.0.1")
        (bnb / "pyproject.toml").write_text((bnb / "pyproject.toml").read_text()
                                            + '[tool.setuptools.package-data]\nbitsandbytes = ["*.so"]\n')
        shutil.copy(_json.__file__, bnb / "bitsandbytes" / "libbitsandbytes_cpu.so")
        (bnb / "bitsandbytes" / "cextension.py").write_text(
            "import ctypes, os\n"
            "BNB_BACKEND = 'CPU'\n"
            "class BNBNativeLibrary:\n"
            "    compiled_with_cuda = False\n"
            "    def __init__(self, lib):\n"
            "        self._lib = lib\n"
            "    def __getattr__(self, item):\n"
            "        return getattr(self._lib, item)\n"
            "lib = BNBNativeLibrary(ctypes.cdll.LoadLibrary(\n"
            "    os.path.join(os.path.dirname(__file__), 'libbitsandbytes_cpu.so')))\n")
        python = _make_venv(root / "venv")
        # setuptools first, then the local packages built without isolation: a fresh isolated
        # build environment per package costs more than everything else here together.
        _pip(python, "setuptools", "wheel")
        _pip(python, "--no-build-isolation", f"python-dateutil=={DATEUTIL}", f"git+file://{gitpkg}",
             "-e", str(editpkg), str(broken), str(crashing), str(hanging), str(bnb))
        yield UserVenv(python=python, git_repo=gitpkg, commit=commit, edit_dir=editpkg)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def user_env(user_venv: UserVenv) -> dict:
    return capture_env(user_venv.python)


def test_probe_runs_in_the_users_interpreter(user_venv: UserVenv, user_env: dict) -> None:
    assert Path(user_venv.python).parent.parent.name == "venv"
    assert user_env["python"]["environment"] == "venv" and "prefix" not in user_env["python"]
    assert user_env["python"]["virtualenv"] is True
    # reprobot's own venv has torch, transformers, peft; the user's has none of them.
    for name in ("torch", "transformers", "peft", "accelerate", "huggingface_hub"):
        assert user_env["packages"][name] == {"installed": False}, name
    assert user_env["torch"] == {"installed": False}
    assert user_env["distributions"]["python-dateutil"] == DATEUTIL
    assert user_env["memory"]["total_bytes"] > 0
    assert user_env["cpu"]["count"] >= 1


def test_vcs_and_editable_installs_are_recorded(user_venv: UserVenv) -> None:
    raw = run_probe(user_venv.python, sections=["distributions"])
    dists = {d["name"]: d for d in raw["distributions"]["distributions"]}
    vcs = dists["tinyvcs"]
    assert vcs["kind"] == "vcs" and vcs["vcs"] == "git"
    assert vcs["commit"] == user_venv.commit
    assert vcs["url"] == f"file://{user_venv.git_repo}"
    assert vcs["installer"] == "pip"
    assert vcs["requires"] == ["six"]
    edit = dists["tinyedit"]
    assert edit["kind"] == "editable"
    assert edit["url"] == user_venv.edit_dir.as_uri()
    assert dists["python-dateutil"]["kind"] == "index"
    assert dists["fake-safetensors" if "fake-safetensors" in dists else "safetensors"]["kind"] == "local-dir"


def test_the_loaded_bitsandbytes_library_is_found(user_env: dict) -> None:
    bnb = user_env["bitsandbytes"]
    assert bnb["installed"] and bnb["version"] == "0.0.1" and bnb["backend"] == "CPU"
    assert bnb["library"] == "<env>/bitsandbytes/libbitsandbytes_cpu.so"  # scrubbed site-packages prefix
    assert bnb["library_class"] == "BNBNativeLibrary" and bnb["compiled_with_cuda"] is False
    if sys.platform.startswith("linux"):  # what the process really mapped
        assert bnb["mapped_libraries"] == [bnb["library"]]
    assert user_env["packages"]["bitsandbytes"]["import"] == "ok"


def test_broken_imports_are_recorded_not_fatal(user_env: dict) -> None:
    # safetensors raises on import: recorded on the package, the probe goes on.
    assert user_env["packages"]["safetensors"]["import"] == "ImportError: broken on purpose"
    # tokenizers kills the interpreter: that section is recorded as failed, the probe is re-run
    # for the rest, and every later section is still there.
    assert "signal 11" in user_env["probe_errors"]["import:tokenizers"]
    assert user_env["packages"]["tokenizers"]["import"].startswith("interpreter died")
    assert user_env["accelerate_config"] == {"found": False}
    assert user_env["packages"]["numpy"]["import"] == "ok"
    assert set(user_env["probe_errors"]) == {"import:tokenizers"}



@pytest.fixture
def quiet_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No ambient variable of interest: torch sets TORCHINDUCTOR_CACHE_DIR in os.environ once
    inductor has run anywhere in this test process, and CI machines set CUDA_* or HF_*."""
    for name in list(os.environ):
        if name.startswith(("TORCH", "PYTORCH", "NCCL_", "CUDA", "HF_", "TRANSFORMERS", "ACCELERATE",
                            "BNB", "BITSANDBYTES", "OMP_", "MKL_", "TOKENIZERS")):
            monkeypatch.delenv(name)
    return monkeypatch


def test_a_hanging_import_times_out_and_the_rest_is_kept(user_venv: UserVenv, quiet_environment,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NUMPY_HANG", "1")
    raw = run_probe(user_venv.python, sections=["python", "import:numpy", "env_vars", "accelerate_config"],
                    timeout=4)
    assert raw["import:numpy"] == {"probe_error": "timed out after 4s"}
    assert raw["python"]["version"]
    assert raw["accelerate_config"] == {"found": False}
    assert raw["env_vars"] == {}  # FAKE_NUMPY_HANG is no variable of interest


def test_env_vars_recorded_but_never_credentials(user_venv: UserVenv, quiet_environment,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    secret = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7"
    monkeypatch.setenv("HF_TOKEN", secret)
    monkeypatch.setenv("HF_HUB_TOKEN_PATH", "/somewhere")
    monkeypatch.setenv("ACCELERATE_API_KEY", "zzz-not-to-be-read")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # Unknown variables under a prefix of interest: a setting is kept, anything else only named.
    monkeypatch.setenv("ACCELERATE_LOG_LEVEL", "info")
    monkeypatch.setenv("PEFT_MIRROR_URL", "https://carol:pw-9f8e7d@mirror.acme.example/simple")
    monkeypatch.setenv("ACCELERATE_RUN_ID", "q8Zr2LmX0pT7vW4nB6yC1dK9")
    repro = ReproDir(tmp_path / "r")
    env = write_env(repro, user_venv.python)
    assert env["env_vars"] == {"CUDA_VISIBLE_DEVICES": "3", "HF_HUB_OFFLINE": "1",
                               "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                               "ACCELERATE_LOG_LEVEL": "info",
                               "ACCELERATE_RUN_ID": "<set; value not recorded>",
                               "PEFT_MIRROR_URL": "<set; value not recorded>"}
    text = repro.env_json.read_text()
    assert json.loads(text)["env_vars"] == env["env_vars"]
    assert secret not in text and "zzz-not-to-be-read" not in text and "HF_TOKEN" not in text
    assert "pw-9f8e7d" not in text and "carol" not in text and "q8Zr2LmX" not in text
    # No home path, user name or host name in what is stored.
    home = os.path.expanduser("~")
    assert home + "/" not in text
    host = socket.gethostname()
    if len(host) >= 4:
        assert not re.search(rf"\b{re.escape(host)}\b", text)


def _repro_dir(tmp_path: Path) -> ReproDir:
    d = ReproDir(tmp_path / "repro-dateutil")
    d.path.mkdir(parents=True)
    d.repro.write_text(REPRO)
    d.signature_json.write_text(json.dumps({"args": []}))
    return d


def _signature(python: str, script: Path):
    outcome = Runner(RunSpec(script=script, python=python, timeout=60)).run(script.read_text())
    failures = distinct_failures(outcome)
    assert failures, outcome.stderr[-2000:]
    return failures[0][0]


def _pip_env() -> dict[str, str]:
    # Install exactly what the lock says: no ambient find-links, extra indexes or constraints.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def test_lock_installs_into_a_fresh_venv_and_reproduces_the_signature(user_venv: UserVenv,
                                                                       tmp_path: Path) -> None:
    reason = index_reachable("https://pypi.org/simple")
    assert reason is None, f"this test needs PyPI: {reason}"
    repro = _repro_dir(tmp_path)
    # The modules come from a real run of repro.py under the launcher (imported_modules=None).
    result = write_lock(repro, user_venv.python, None)
    assert result.mode == "compiled", result.reason
    assert result.roots == ["python-dateutil", "six"]  # dateutil imports six itself
    req_in = repro.requirements_in.read_text().splitlines()
    assert f"python-dateutil=={DATEUTIL}" in req_in
    assert "tinyedit" not in "\n".join(req_in) and "tinyvcs" not in "\n".join(req_in)  # not imported
    lock = repro.requirements_lock.read_text()
    assert re.search(rf"^python-dateutil=={re.escape(DATEUTIL)} \\\n    --hash=sha256:[0-9a-f]{{64}}", lock, re.M)
    assert re.search(r"^six==[\d.]+ \\\n    --hash=sha256:", lock, re.M)
    assert "--index-url https://pypi.org/simple" in lock.splitlines()

    fresh = _make_venv(tmp_path / "fresh")
    _pip(fresh, "--require-hashes", "-r", str(repro.requirements_lock), clean=True)
    frozen = subprocess.run([sys.executable, "-m", "pip", "--python", fresh, "freeze"], check=True,
                            capture_output=True, text=True, env=_pip_env()).stdout
    assert f"python-dateutil=={DATEUTIL}" in frozen.splitlines()

    original = _signature(user_venv.python, repro.repro)
    rebuilt = _signature(fresh, repro.repro)
    assert original.exc_type.endswith("ParserError")
    assert any(f.startswith("dateutil/parser/") for f in original.frames)
    assert rebuilt == original


def test_vcs_install_is_named_never_installable(user_venv: UserVenv, tmp_path: Path) -> None:
    """A package installed from a VCS URL (or an editable folder) is a source the reporter chose:
    the lock names it as installed from a private source, outside the hashed part, and no line
    anywhere tells pip where to fetch it; its dependencies are still pinned and hashed."""
    repro = _repro_dir(tmp_path)
    result = write_lock(repro, user_venv.python, ["tinyvcs", "dateutil", "tinyedit", "os", "sys"])
    assert result.mode == "compiled", result.reason
    assert result.roots == ["python-dateutil", "tinyedit", "tinyvcs"]
    assert result.unhashable == ["tinyedit", "tinyvcs"]
    private = "installed from a private source: not installable from here"
    req_in = repro.requirements_in.read_text().splitlines()
    assert "# tinyvcs==0.1.0  (" + private + ")" in req_in
    assert "# tinyedit==0.1.0  (" + private + ")" in req_in
    lock = repro.requirements_lock.read_text()
    hashed, _, block = lock.partition("# ---- Not hash-pinnable")
    # six is tinyvcs's dependency: pinned and hashed although the VCS package itself cannot be.
    assert re.search(r"^six==[\d.]+ \\\n    --hash=sha256:", hashed, re.M)
    assert "tinyvcs" not in hashed.split("# Install:")[1]
    assert "# tinyvcs==0.1.0  (" + private + ")" in block.splitlines()
    for text in (lock, "\n".join(req_in)):
        assert "git+" not in text and "file:" not in text and str(user_venv.git_repo) not in text
        assert user_venv.commit not in text and "pip install --no-deps" not in text


def test_ambient_pip_configuration_does_not_leak(user_venv: UserVenv, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = http://127.0.0.1:9/conf-index\nextra-index-url = http://127.0.0.1:9/x\n"
                    "constraint = /nonexistent/constraints.txt\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/env-index")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "http://127.0.0.1:9/env-extra")
    monkeypatch.setenv("PIP_FIND_LINKS", "/nonexistent/wheels")
    monkeypatch.delenv("REPROBOT_INDEX_URL", raising=False)
    repro = _repro_dir(tmp_path)
    result = write_lock(repro, user_venv.python, ["dateutil", "six", "json"])
    assert result.mode == "compiled", result.reason
    lock = repro.requirements_lock.read_text()
    assert "127.0.0.1" not in lock and "nonexistent" not in lock
    assert result.roots == ["python-dateutil", "six"]


def test_snapshot_when_the_index_is_unreachable(user_venv: UserVenv, tmp_path: Path) -> None:
    repro = _repro_dir(tmp_path)
    result = write_lock(repro, user_venv.python, ["dateutil", "tinyvcs", "tinyedit", "os"],
                        index_url="http://127.0.0.1:9/simple")
    assert result.mode == "snapshot"
    assert "127.0.0.1:9" in result.reason
    lines = repro.requirements_lock.read_text().splitlines()
    assert lines[0].startswith("# requirements.lock — SNAPSHOT, NOT COMPILED:")
    assert f"python-dateutil=={DATEUTIL}" in lines
    assert any(re.fullmatch(r"six==[\d.]+", ln) for ln in lines)
    assert "# tinyvcs==0.1.0  (installed from a private source: not installable from here)" in lines
    assert "# tinyedit==0.1.0  (installed from a private source: not installable from here)" in lines
    # the reporter's unreachable index is said in the result, never written into the file
    assert not any("127.0.0.1" in ln or "git+" in ln for ln in lines)
    assert not any("--hash" in ln for ln in lines)


def test_cli_env_writes_and_checks(user_venv: UserVenv, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    repro = _repro_dir(tmp_path)
    assert main(["env", "--python", user_venv.python, "--offline", str(repro.path)]) == 0
    out = capsys.readouterr().out
    assert "env.json" in out and "snapshot" in out
    stored = json.loads(repro.env_json.read_text())
    # tinyvcs came from a git+file:// URL: env.json names it only as private (bot/env/privacy.py)
    private = {k: v for k, v in stored["distributions"].items() if k.startswith("private package (not on PyPI)")}
    assert "tinyvcs" not in stored["distributions"] and "0.1.0" in private.values()
    assert f"python-dateutil=={DATEUTIL}" in repro.requirements_in.read_text().splitlines()
    assert repro.requirements_lock.read_text().startswith("# requirements.lock — SNAPSHOT")
    # Same interpreter: nothing differs.
    assert main(["env", "--check", str(repro.path), "--python", user_venv.python]) == 0
    assert "no differences" in capsys.readouterr().out
    # A bare interpreter lacks the user's packages: the check lists them and exits 1.
    other = _make_venv(tmp_path / "other")
    assert main(["env", "--check", str(repro.path), "--python", other, "--json"]) == 1
    diffs = json.loads(capsys.readouterr().out)["differences"]
    by_field = {d["field"]: d for d in diffs}
    assert any(d["group"] == "distributions" and d["field"] in private and d["stored"] == "0.1.0"
               and d["current"] is None for d in diffs)
    assert by_field["bitsandbytes"] == {"group": "stack", "field": "bitsandbytes", "stored": "0.0.1 (local-dir)",
                                        "current": None}
    assert by_field["python-dateutil"]["stored"] == DATEUTIL


def test_packages_on_pythonpath_are_seen(user_venv: UserVenv, monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    """A stack installed with `pip install --target` and put on PYTHONPATH (how wheels are carried
    to a GPU box) is the stack the failure ran in: the probe must see it as the candidates do."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    "safetensors==0.8.0"], check=True, capture_output=True, timeout=300)
    # The user venv has its own stand-in safetensors; PYTHONPATH comes first on sys.path.
    before = capture_env(user_venv.python)["packages"]["safetensors"]
    assert before.get("version") != "0.8.0"
    monkeypatch.setenv("PYTHONPATH", str(target))
    seen = capture_env(user_venv.python)["packages"]["safetensors"]
    assert seen["installed"] and seen["version"] == "0.8.0"
