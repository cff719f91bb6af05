"""Who made the tensors a failing line read (reducer/run/exception_hook/reprobot_built.py,
bot/rerun/built.py, bot/upstream/made.py) and what routing makes of it: real runs of a repro whose
two packages are small fakes on the run's path (a `peft` that builds a prefix, a `transformers`
whose cache concatenates it), real torch, real subprocesses."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from bot.cli import main  # noqa: E402
from bot.rerun.built import run_built, write_built  # noqa: E402
from bot.store import ReproDir  # noqa: E402
from bot.upstream.failure import failure_from_repro  # noqa: E402
from bot.upstream.made import FILE, Built, Made, read_built  # noqa: E402
from bot.upstream.route import route  # noqa: E402
from tests.test_contrast_runs import make_repro  # noqa: E402

PEFT = '''\
import torch


def make_prefix(n):
    base = torch.arange(n * 4.0).view(n, 4)
    return base.permute(1, 0).split(1)[0]


def run(cache, states, n=3):
    return cache.update(make_prefix(n), states)


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2
'''
TRANSFORMERS = '''\
import torch


class Cache:
    def __init__(self):
        self.keys = []

    def update(self, prefix, states):
        self.keys.append(prefix)
        return torch.cat([self.keys[0], states], dim=-1)
'''
HANDED = '''\
import torch
import peft
from transformers import Cache

cache = Cache()
peft.run(cache, torch.zeros(2, 2))
'''
# the user's own line hands transformers what peft made: nothing of peft's is on the path
DIRECT = '''\
import torch
from peft import make_prefix
from transformers import Cache

cache = Cache()
cache.update(make_prefix(3), torch.zeros(2, 2))
'''
# the same failure, but the tensor the cache reads was made in a module's forward: an activation
ACTIVATION = '''\
import torch
from peft import Scale, make_prefix
from transformers import Cache

cache = Cache()
cache.update(Scale()(make_prefix(3)), torch.zeros(2, 2))
'''


@pytest.fixture
def fakes(tmp_path, monkeypatch):
    site = tmp_path / "env" / "site-packages"
    for name, text in (("peft", PEFT), ("transformers", TRANSFORMERS)):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(text)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    return tmp_path


def test_a_prefix_made_by_one_package_and_read_by_another_is_recorded_as_handed_over(fakes):
    folder = ReproDir(make_repro(fakes / "repro", HANDED))
    built = run_built(folder, sys.executable)
    assert built is not None
    frame, made = built.frames[-1]
    assert frame == "transformers/__init__.py:update"
    assert Made("self.keys[0]", "peft", "peft/__init__.py:make_prefix") in made
    # the zeros came from the user's own line: recorded, but nobody's hand-over
    assert any(m.name == "states" and m.package is None for m in made)
    assert built.handed_over("transformers") == [(frame, Made("self.keys[0]", "peft", "peft/__init__.py:make_prefix"))]
    assert built.handed_over("peft") == []


def test_a_tensor_made_in_a_forward_is_an_activation_and_not_recorded(fakes):
    folder = ReproDir(make_repro(fakes / "repro", ACTIVATION))
    built = run_built(folder, sys.executable)
    assert built is not None and built.frames
    assert built.handed_over("transformers") == []


def test_a_run_that_fails_otherwise_records_nothing(fakes):
    folder = ReproDir(make_repro(fakes / "repro", HANDED))
    folder.repro.write_text(HANDED.replace("torch.zeros(2, 2)", "torch.zeros(2)"))   # another message
    assert run_built(folder, sys.executable) is None


def test_a_hand_over_weighs_as_much_as_the_raise_and_the_path_decides(fakes):
    # the user called transformers directly: the raise and the call outweigh the hand-over, which
    # still shows among peft's reasons
    folder = ReproDir(make_repro(fakes / "repro", DIRECT))
    write_built(folder, run_built(folder, sys.executable))
    got = route(failure_from_repro(folder.path))
    assert got.target == "huggingface/transformers"
    assert "next: peft" in got.verdict


def test_routing_weighs_the_hand_over_and_says_so(fakes):
    folder = ReproDir(make_repro(fakes / "repro", HANDED))
    before = route(failure_from_repro(folder.path))
    assert before.target == "huggingface/transformers"
    write_built(folder, run_built(folder, sys.executable))
    assert read_built(folder.path) is not None
    after = route(failure_from_repro(folder.path))
    assert after.target == "huggingface/peft", after.verdict
    reasons = next(c["reasons"] for c in after.ranked if c["repo"] == "huggingface/peft")
    assert any("made and handed over" in r and "self.keys[0]" in r for r in reasons), reasons


def test_route_runs_the_repro_once_and_keeps_built_json(fakes, capsys):
    folder = make_repro(fakes / "repro", HANDED)
    assert main(["route", str(folder), "--no-issue-index", "--python", sys.executable, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["built"] == "ran" and data["target"] == "huggingface/peft"
    assert (folder / FILE).is_file()
    assert main(["route", str(folder), "--no-issue-index", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["built"] == "kept"
    (folder / FILE).unlink()
    assert main(["route", str(folder), "--no-issue-index", "--no-run", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["built"] == "not run" and data["target"] == "huggingface/transformers"


def test_built_json_round_trips_and_a_broken_file_reads_as_none(tmp_path):
    built = Built([("transformers/cache_utils.py:update", [Made("key_states", "peft", "peft/peft_model.py:get_prompt")])])
    assert Built.from_dict(json.loads(json.dumps(built.to_dict()))) == built
    (tmp_path / FILE).write_text("{not json")
    assert read_built(tmp_path) is None
    assert read_built(tmp_path / "absent") is None


def test_a_repro_without_torch_or_the_stack_is_not_run(tmp_path, capsys):
    # nothing there can make a tensor: no run (a flaky repro would lose a draw to it)
    folder = make_repro(tmp_path / "plain", 'import json\n\n\ndef step():\n    raise ValueError("no batch")\n\n\nstep()\n')
    assert main(["route", str(folder), "--no-issue-index", "--python", sys.executable, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["built"].startswith("not run: the repro imports neither torch") and not (folder / FILE).exists()
