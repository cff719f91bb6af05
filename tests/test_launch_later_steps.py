"""A repro reduced through a launch line runs through that line in every later step (issue #40).

Two real cases, 2 ranks each on the CPU (gloo, tiny tensors): a DDP model whose auxiliary head
the step leaves unused (`heads=1`), so every rank raises DDP's "Expected to have finished
reduction in the prior iteration". One is launched by ``torchrun --nproc_per_node 2``, the other
by ``accelerate launch --multi_gpu --num_processes 2`` (``ACCELERATE_USE_CPU``: gloo ranks).

Run as ``python repro.py`` either script fails otherwise (no RANK, no process group), so each
check below fails unless the step ran the line: `versions` reports the same failure on the locked
versions, `watch --dry-run` on a new release of a package in the lock, `contrast`'s one change
(dropping ``heads=1``) makes it pass, and the draft's steps give the line.

The torchrun folder is also a reduction stopped by ``--max-time`` (exit 14): its failure is
recorded first (``--no-reduce``), then ``--resume --max-time 1`` stops the search at once, so the
result is verified cold and its environment pinned in the grace that follows, as any stopped
reduction's. One folder per case serves all its checks: a DDP run takes seconds."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from bot.cli import main
from bot.rerun.verdict import Kind
from tests.test_rerun import build_wheel

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.slow,      # about a dozen 2-rank runs, each importing torch three times
              pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
                                 reason="torch.distributed with gloo is not available")]

MODEL = '''\
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.used = torch.nn.Linear(2, 2)
        self.aux = torch.nn.Linear(2, 2)

    def forward(self, x, heads=2):
        out = self.used(x)
        if heads > 1:
            out = out + self.aux(x)
        return out
'''

TORCHRUN = f'''\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


{MODEL}

def main():
    dist.init_process_group("gloo")
    model = DDP(Net())
    for step in range(2):
        model(torch.ones(1, 2), heads=1).sum().backward()


main()
'''

ACCELERATE = f'''\
import os

import torch
from accelerate import Accelerator


{MODEL}

os.environ["ACCELERATE_USE_CPU"] = "true"      # gloo ranks on the CPU
accelerator = Accelerator()
model = accelerator.prepare(Net())
for step in range(2):
    accelerator.backward(model(torch.ones(1, 2), heads=1).sum())
'''

LINES = {
    "torchrun": ["torchrun", "--nproc_per_node", "2", "ddp_train.py"],
    "accelerate": ["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "acc_train.py"],
}
MESSAGE = "Expected to have finished reduction in the prior iteration"


def _installed(name: str) -> str:
    from importlib.metadata import version
    return version(name)


@pytest.fixture(scope="module", params=["torchrun", "accelerate"])
def case(request, tmp_path_factory):
    """(kind, folder, work dir, wheels): the case's repro folder, reduced through its line."""
    kind = request.param
    if kind == "accelerate":
        pytest.importorskip("accelerate")
    work = tmp_path_factory.mktemp(kind)
    line = LINES[kind]
    (work / line[-1]).write_text(TORCHRUN if kind == "torchrun" else ACCELERATE)
    wheels = work / "wheels"
    wheels.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        mp.setenv("REPROBOT_OFFLINE", "1")
        mp.setenv("REPROBOT_ENV_CACHE", str(work / "envs"))
        assert main(["reduce", "--runs", "1", "--no-reduce", "--out", "store", "--quiet", "--", *line]) == 0
        (folder,) = (work / "store").iterdir()
        if kind == "torchrun":
            # the search stops at once (exit 14): the stopped result is verified and pinned
            assert main(["reduce", "--resume", "--runs", "1", "--cold", "--no-trace", "--max-time", "1",
                         "--out", "store", "--", *line]) == 14
        else:
            # recorded through the line; repro.py is the script (`--no-reduce`), the lock the
            # installed versions (what pinning writes, without a minute of probing the stack)
            shutil.copy(folder / "original.py", folder / "repro.py")
            (folder / "requirements.lock").write_text(
                f"torch=={_installed('torch')}\naccelerate=={_installed('accelerate')}\n")
    return kind, folder, work, wheels


@pytest.fixture
def at(case, monkeypatch):
    kind, folder, work, wheels = case
    monkeypatch.chdir(work)
    monkeypatch.setenv("REPROBOT_OFFLINE", "1")
    monkeypatch.setenv("REPROBOT_ENV_CACHE", str(work / "envs"))
    monkeypatch.setenv("COLUMNS", "250")
    return case


def test_the_line_is_the_folders_recipe(at):
    kind, folder, _, _ = at
    sig = json.loads((folder / "signature.json").read_text())
    assert sig["launch"]["tokens"] == LINES[kind] and MESSAGE in sig["signature"]["message"]


def test_versions_reports_the_same_failure_on_the_locked_versions(at, capsys):
    kind, folder, _, wheels = at
    assert main(["versions", str(folder), "--no-index", "--find-links", str(wheels)]) == 0
    rows = json.loads((folder / "versions.json").read_text())["rows"]
    locked = next(r for r in rows if r["label"] == "locked")
    assert locked["verdict"]["kind"] == Kind.SAME.value, locked     # not "RANK expected, but not set"
    assert locked["changed"] == {}                                  # the lock is what is installed


def test_watch_dry_run_runs_it_through_the_line(at, capsys):
    kind, folder, work, wheels = at
    # a release of a package the lock names (the repro never imports it): its row runs the
    # repro on the locked stack plus that release
    lock = folder / "requirements.lock"
    if "fakelib" not in lock.read_text():
        lock.write_text(lock.read_text() + "fakelib==1.0\n")
        build_wheel(wheels, "fakelib", "1.0", "")
        build_wheel(wheels, "fakelib", "1.1", "")
    assert main(["watch", str(folder.parent), "--no-index", "--find-links", str(wheels), "--packages", "fakelib",
                 "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{folder.name}: still fails on fakelib 1.1" in out, out
    finding = json.loads((folder / "watch.json").read_text())["findings"][0]
    assert finding["row"]["verdict"]["kind"] == Kind.SAME.value


def test_contrast_runs_each_change_through_the_line(at, capsys):
    kind, folder, _, _ = at
    assert main(["contrast", str(folder)]) == 0
    changes = json.loads((folder / "contrast.json").read_text())["changes"]
    # the one change the repro offers: without `heads=1` the aux head is used, DDP is content
    assert [(c["change"], c["verdict"]["kind"]) for c in changes] == [("without `heads=1` (the default)", Kind.PASS.value)]


def test_the_drafts_steps_give_the_line(at):
    kind, folder, _, _ = at
    from bot.issue.draft import build_draft
    body = build_draft(folder, "pytorch").body
    want = {"torchrun": r"torchrun --nproc_per_node 2 (repro|ddp_train)\.py",
            "accelerate": r"accelerate launch --multi_gpu --num_processes 2 (repro|acc_train)\.py"}[kind]
    assert re.search(rf"```shell\n{want}\n```", body), body


def _script_frames(text: str) -> list[tuple[int, str]]:
    return [(int(n), code.strip()) for n, code in
            re.findall(r'File "(?:repro|ddp_train)\.py", line (\d+), in \S+\n\s+(.+)', text)]


@pytest.mark.parametrize("case", ["torchrun"], indirect=True)     # the stopped reduction is the torchrun case
def test_a_stopped_reduction_through_the_line_is_verified_pinned_and_drafted_from_its_own_run(at):
    kind, folder, _, _ = at
    red = json.loads((folder / "reduction.json").read_text())
    assert red["status"] == "stopped: time limit"
    assert red["verified"] in ("alone, offline", "beside its files") and red.get("repro_sha256")
    assert red.get("repro_record")                       # traceback.txt is the repro's cold run
    assert (folder / "env.json").is_file()
    assert "torch==" in (folder / "requirements.lock").read_text()
    lines = (folder / "repro.py").read_text().splitlines()
    own = _script_frames((folder / "traceback.txt").read_text())
    assert own and all(lines[n - 1].strip() == code for n, code in own)
    from bot.issue.draft import build_draft
    body = build_draft(folder, "pytorch").body
    shown = _script_frames(body)
    assert shown and all(lines[n - 1].strip() == code for n, code in shown)
    assert "(unverified)" not in body
