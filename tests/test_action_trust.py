"""The Action holds against posted code (issue #28): a simulated runner layout, attacked by a
posted script that does what a red-team pass did, through the real reproduce job (real
namespaces, a real reduction, real follow-up steps).

The runner layout lives in a folder the maintainer shares read-only with the sandbox
(``read_only``), so that everything in it would be visible unless reprobot hides it: the runner's
own folder (``.runner``, ``.credentials``, ``_diag``), ``RUNNER_TEMP`` with the command files
and the artifact folder, the workspace, the home with a docker login, a host UNIX socket. The
same script run with ``--isolation none`` is the control that shows each check can fail.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import socket
import sys
import sysconfig
from pathlib import Path

import pytest

from bot.action.event import load_event
from bot.action.reproduce import ReproduceOptions, reproduce
from bot.action.sandbox import Limits
from tests.sandbox_support import needs_userns

EVENTS = Path(__file__).parent / "data" / "events"
# In the runner's files only, never in the script: whatever of it reaches the artifact was read.
PLANT = "reprobot-plant-" + hashlib.sha256(b"trust").hexdigest()[:12]
# Skipped only where the kernel refuses user namespaces: a sandbox reprobot fails to build
# elsewhere fails these tests ("not-isolated" ran nothing, so no attack would land).
needs_namespaces = needs_userns
COMMAND_FILES = ("set_env_1", "add_path_1", "set_output_1", "step_summary_1", "save_state_1")
ROUTE = Path(__file__).resolve().parents[1] / "bot" / "commands" / "route.py"

# What a red-team script does; every result goes into the exception message, so the artifact
# (traceback.txt, signature.json) carries what the posted code could see and do.
ATTACK = r'''
import glob, os, socket, sys, time

R = {runner!r}
def can(fn):
    try:
        return fn()
    except OSError as e:
        return type(e).__name__

def append(path, text):
    with open(path, "a") as fh:
        fh.write(text)
    return "W"

def read(path):
    with open(path, "rb") as fh:
        return "R%d" % (fh.read().count(b"reprobot-plant-"))

def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return "C"

def abstract():
    s = socket.socket(socket.AF_UNIX)
    s.connect("\0" + {abstract!r})
    return "C"

seen = []
cmd = "/".join([R, "_work/_temp/_runner_file_commands"])
seen.append("cmd=" + "".join(str(can(lambda f=f: append(os.path.join(cmd, f), "LD_PRELOAD=/x.so\n")))[0] for f in {command_files!r}))
seen.append("diag=" + str(can(lambda: read(R + "/_diag/Runner_1.log"))))
seen.append("cred=" + str(can(lambda: read(R + "/.credentials"))))
seen.append("docker=" + str(can(lambda: read({home!r} + "/.docker/config.json"))))
seen.append("sock=" + str(can(lambda: connect({sock!r}))))
seen.append("abstract=" + str(can(lambda: abstract())))
seen.append("artifact=" + str(can(lambda: append({artifact!r} + "/index.html", "<script>"))))
seen.append("pth=" + "".join(str(can(lambda d=d: append(os.path.join(d, "reprobot_evil.pth"), {pth_line!r})))[0]
                              for d in {site_dirs!r}))
seen.append("route=" + "".join(str(can(lambda p=p: append(p, {route_line!r})))[0]
                                for p in dict.fromkeys(glob.glob("/reprobot/bot/commands/route.py") + {route_paths!r})))
# A later step would read through a link left in the repro folder: swap repro.py for one.
if os.fork() == 0:
    os.setsid()
    end = time.time() + 120
    while time.time() < end:
        for folder in glob.glob("/scratch/repros/*"):
            p = os.path.join(folder, "repro.py")
            if os.path.exists(p) and not os.path.islink(p):
                try:
                    os.replace(p, p + ".bak")
                    os.symlink({visible_secret!r}, p)
                except OSError:
                    pass
        time.sleep(0.05)
    os._exit(0)
raise RuntimeError("saw " + " ".join(seen))
'''


def _runner(tmp: Path) -> dict[str, Path]:
    """A self-hosted runner's layout, as actions/runner lays it out."""
    runner = tmp / "actions-runner"
    paths = {"runner": runner, "temp": runner / "_work" / "_temp", "workspace": runner / "_work" / "repo" / "repo",
             "home": tmp / "home" / "runner", "shared": tmp / "shared"}
    for p in paths.values():
        p.mkdir(parents=True)
    (runner / ".runner").write_text('{"agentName": "gpu-1"}\n')
    (runner / ".credentials").write_text(json.dumps({"scheme": "OAuth", "data": {"token": PLANT}}))
    (runner / "_diag").mkdir()
    (runner / "_diag" / "Runner_1.log").write_text(f"ACTIONS_RUNTIME_TOKEN={PLANT}\n")
    (paths["temp"] / "_runner_file_commands").mkdir()
    for name in COMMAND_FILES:
        (paths["temp"] / "_runner_file_commands" / name).write_text("")
    (paths["home"] / ".docker").mkdir()
    (paths["home"] / ".docker" / "config.json").write_text(json.dumps({"auths": {"x": {"auth": PLANT}}}))
    # Readable inside on purpose (a model cache a maintainer shares): a link to it is still refused.
    (paths["shared"] / "visible.txt").write_text(f"{PLANT}\n")
    return paths


def _attack(tmp: Path, isolation: str, *, own_interpreter: bool) -> tuple[object, Path, dict[str, Path], str]:
    paths = _runner(tmp)
    sock_path = str(paths["temp"] / "docker.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(sock_path)
    unix.listen(4)
    abstract_name = f"reprobot-test-{os.getpid()}-{isolation}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + abstract_name)
    abstract.listen(4)
    marker = tmp / "planted-code-ran"
    pth_line = f"import os; open({str(marker)!r}, 'a').write('pth\\n')\n"
    route_line = f"\nopen({str(marker)!r}, 'a').write('route\\n')\n"
    # The job interpreter's own site-packages is attacked only where it cannot be written: the
    # control run must not plant a .pth in the test's environment.
    site_dirs = [sysconfig.get_paths()["purelib"]] if own_interpreter else [str(tmp / "fake-site")]
    (tmp / "fake-site").mkdir()
    artifact = paths["temp"] / "reprobot-artifact"
    script = ATTACK.format(runner=str(paths["runner"]), home=str(paths["home"]), sock=sock_path,
                           abstract=abstract_name, artifact=str(artifact), command_files=COMMAND_FILES,
                           site_dirs=site_dirs, pth_line=pth_line, route_line=route_line,
                           route_paths=[str(ROUTE)] if own_interpreter else [],
                           visible_secret=str(paths["shared"] / "visible.txt"))
    ev = dataclasses.replace(load_event(EVENTS / "labeled_failing.json"), body=f"```python\n{script}```\n")
    environ = {**os.environ, "HOME": str(paths["home"]), "RUNNER_TEMP": str(paths["temp"]),
               "GITHUB_WORKSPACE": str(paths["workspace"]), "RUNNER_WORKSPACE": str(paths["runner"] / "_work"),
               "REPROBOT_GATE_ALLOWED": "true"}
    opts = ReproduceOptions(out=artifact, scratch_root=tmp / "scratch", max_time=25, runs=1, isolation=isolation,
                            read_only=(str(tmp),))
    try:
        result = reproduce(ev, opts, environ=environ)
    finally:
        unix.close()
        abstract.close()
    texts = {str(p.relative_to(artifact)): p.read_text(errors="replace") for p in artifact.rglob("*") if p.is_file()}
    found = re.findall(r"saw (cmd=\S+ .*?route=\S*)", "\n".join(texts.values()))
    assert found, (result.status, result.detail, sorted(texts))
    return result, artifact, paths, found[0]


@needs_namespaces
def test_posted_code_reaches_nothing_of_the_runner(tmp_path: Path) -> None:
    route_before = ROUTE.read_bytes()
    result, artifact, paths, seen = _attack(tmp_path, "namespaces", own_interpreter=True)
    try:
        assert result.status in ("reduced", "reproduced"), (result.status, result.detail)
        fields = dict(f.split("=", 1) for f in seen.split())
        # Command files, _diag, .credentials, the home, the socket, the artifact: not even there.
        assert fields["cmd"] == "FFFFF", seen
        assert fields["diag"] == fields["cred"] == fields["docker"] == "FileNotFoundError", seen
        assert fields["sock"] == "FileNotFoundError" and fields["abstract"] == "ConnectionRefusedError", seen
        assert fields["artifact"] == "FileNotFoundError", seen
        # The job interpreter and reprobot's snapshot are there, and read-only.
        # pth: OSError (read-only file system); route, in this order wherever the checkout lives:
        # the snapshot's PermissionError (read-only files, and no capability to override that),
        # the checkout's FileNotFoundError (not there).
        assert fields["pth"] == "O" and fields["route"] == "PF", seen
        for name in COMMAND_FILES:
            assert (paths["temp"] / "_runner_file_commands" / name).read_text() == "", name
        assert not (tmp_path / "planted-code-ran").exists()
        assert not Path(sysconfig.get_paths()["purelib"], "reprobot_evil.pth").exists()
        assert ROUTE.read_bytes() == route_before
        # The artifact is what reprobot wrote: its allow-list, plain files, no plant.
        files = sorted(str(p.relative_to(artifact)) for p in artifact.rglob("*"))
        assert "index.html" not in files and not any(p.is_symlink() for p in artifact.rglob("*")), files
        assert all(re.fullmatch(r"result\.json|repro|repro/[A-Za-z0-9][\w.-]*\.(py|json|md|txt|lock|in)", f)
                   for f in files), files
        blob = "\n".join(p.read_text(errors="replace") for p in artifact.rglob("*") if p.is_file())
        assert PLANT not in blob
        # The follow-up steps ran on what the sandbox handed them (routing and a draft exist).
        assert result.steps.get("route") == 0 and (artifact / "repro" / "route.json").is_file(), result.steps
    finally:
        Path(sysconfig.get_paths()["purelib"], "reprobot_evil.pth").unlink(missing_ok=True)


@needs_namespaces
def test_without_isolation_the_same_attacks_land(tmp_path: Path) -> None:
    """The control: run as a plain process, the same script writes the command files, reads the
    runner's secrets and reaches the socket, so the checks above can fail."""
    result, artifact, paths, seen = _attack(tmp_path, "none", own_interpreter=False)
    fields = dict(f.split("=", 1) for f in seen.split())
    assert fields["cmd"] == "WWWWW" and fields["diag"] == "R1" and fields["cred"] == "R1", seen
    assert fields["docker"] == "R1" and fields["sock"] == "C" and fields["abstract"] == "C", seen
    assert fields["pth"] == "W", seen
    assert "LD_PRELOAD" in (paths["temp"] / "_runner_file_commands" / "set_env_1").read_text()
    # Even then the artifact holds only reprobot's own files, read without following links.
    assert not (artifact / "index.html").exists() and not any(p.is_symlink() for p in artifact.rglob("*"))


# The disk limit stops the run that reaches it (tests/test_action_limits.py), so this one only
# looks at the limits a script meets as errors of its own.
LIMITED = r'''
import os, resource, shutil, tempfile
out = []
d = tempfile.mkdtemp()
try:
    with open(d + "/big", "wb") as fh:
        fh.write(b"x" * (3 << 20))
    out.append("fsize=ok")
except OSError as e:
    out.append("fsize=%s" % e.strerror.replace(" ", "-"))
shutil.rmtree(d)
out.append("nproc=%d" % resource.getrlimit(resource.RLIMIT_NPROC)[0])
raise RuntimeError("limits " + " ".join(out))
'''


@needs_namespaces
def test_candidates_get_file_size_and_process_limits(tmp_path: Path) -> None:
    ev = dataclasses.replace(load_event(EVENTS / "labeled_failing.json"), body=f"```python\n{LIMITED}```\n")
    limits = Limits(procs=200, file_size=2 << 20, disk=24 << 20, shm=8 << 20)
    opts = ReproduceOptions(out=tmp_path / "artifact", scratch_root=tmp_path / "scratch", max_time=25, runs=1,
                            limits=limits)
    result = reproduce(ev, opts, environ={**os.environ, "REPROBOT_GATE_ALLOWED": "true"})
    blob = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "artifact").rglob("*") if p.is_file())
    m = re.search(r"limits fsize=(\S+) nproc=(\d+)", blob)
    assert m, (result.status, result.detail)
    assert m.group(1) == "File-too-large", m.group(0)
    # RLIMIT_NPROC counts the user's processes now plus the budget (root is exempt from it).
    assert 200 < int(m.group(2)) < 200 + 100_000, m.group(0)


GPU_SCRIPT = r'''
import torch
x = torch.ones(4, device="cuda")
name = torch.cuda.get_device_name(0)
raise RuntimeError(f"gpu ok: {torch.cuda.device_count()} device(s), sum {int(x.sum())}, {name}")
'''


@pytest.mark.gpu
@needs_namespaces
def test_the_gpu_works_inside_the_sandbox(tmp_path: Path) -> None:
    """The sandbox's /dev holds only plain device nodes and the GPU's: CUDA must still work."""
    pytest.importorskip("torch")
    import torch
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here")
    ev = dataclasses.replace(load_event(EVENTS / "labeled_failing.json"), body=f"```python\n{GPU_SCRIPT}```\n")
    opts = ReproduceOptions(out=tmp_path / "artifact", scratch_root=tmp_path / "scratch", max_time=120, runs=1)
    result = reproduce(ev, opts, environ={**os.environ, "REPROBOT_GATE_ALLOWED": "true"})
    blob = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "artifact").rglob("*") if p.is_file())
    assert re.search(r"gpu ok: \d+ device\(s\), sum 4", blob), (result.status, result.detail, blob[-2000:])
