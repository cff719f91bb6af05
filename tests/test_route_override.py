"""Routing a rejected call that a library made on its own object (``self.log(logs, start_time)``)
and that bound to an override: another package's override goes to that package (trl-2445's shape:
transformers' Trainer calling trl's ``DPOTrainer.log``), the user's own subclass is the user's
code, and a library's own method refusing its own call stays the caller's. Real tracebacks: fake
``transformers`` and ``trl`` packages under a site-packages folder, a script run in a subprocess."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.upstream.failure import failure_from_text
from bot.upstream.route import route

# transformers' Trainer calls ``self.log`` with the argument its own ``log`` took in a new release.
TRAINER = '''\
class Trainer:
    def log(self, logs, start_time=None):
        return logs

    def _maybe_log_save_evaluate(self, start_time):
        logs = {"loss": 1.0}
        self.log(logs, start_time)

    def train(self):
        self._maybe_log_save_evaluate(0.0)
'''
# ...and an old release of it, whose own ``log`` does not take the argument it passes.
TRAINER_OWN_BUG = TRAINER.replace("def log(self, logs, start_time=None):", "def log(self, logs):")
DPO = '''\
from transformers.trainer import Trainer


class DPOTrainer(Trainer):
    def log(self, logs):
        return super().log(logs)
'''


def _site(tmp_path: Path, trainer: str) -> Path:
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    for rel, text in {"transformers/__init__.py": "from transformers.trainer import Trainer\n",
                      "transformers/trainer.py": trainer,
                      "trl/__init__.py": "from trl.trainer.dpo_trainer import DPOTrainer\n",
                      "trl/trainer/__init__.py": "",
                      "trl/trainer/dpo_trainer.py": DPO}.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    return site


def _traceback(tmp_path: Path, script: str, trainer: str = TRAINER) -> str:
    """The script's traceback, run for real against the fake packages."""
    path = tmp_path / "train.py"
    path.write_text(script)
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(_site(tmp_path, trainer)), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 1 and "TypeError" in run.stderr, run.stderr
    return run.stderr


def test_another_packages_override_goes_to_its_owner_not_to_the_caller(tmp_path: Path) -> None:
    text = _traceback(tmp_path, "from trl import DPOTrainer\n\nDPOTrainer().train()\n")
    assert "DPOTrainer.log() takes 2 positional arguments but 3 were given" in text
    r = route(failure_from_text(text))
    assert r.target == "huggingface/trl", r.ranked
    assert r.raised_in == "transformers"        # the frame's package, as the traceback shows it
    assert "override" in r.verdict and "DPOTrainer.log" in r.verdict
    assert r.boundary and "an override of Trainer.log" in r.boundary
    assert "huggingface/transformers" in r.cross_links
    scores = {c["repo"]: c["score"] for c in r.ranked}
    assert scores["huggingface/trl"] > scores["huggingface/transformers"] + 4


@pytest.mark.parametrize("as_repro", [False, True])
def test_the_users_own_override_is_the_users_code(tmp_path: Path, as_repro: bool) -> None:
    script = ("from transformers import Trainer\n\n\nclass MyTrainer(Trainer):\n    def log(self, logs):\n"
              "        print(logs)\n\n\nMyTrainer().train()\n")
    text = _traceback(tmp_path, script)
    failure = failure_from_text(text)
    if as_repro:
        # a stored repro: the user's file is not on this machine, repro.py says who defined the class
        (tmp_path / "train.py").unlink()
        failure.repro_source = script
    r = route(failure)
    assert r.target is None, r.ranked
    assert r.verdict.startswith("not one of ours") and "the user's override MyTrainer.log()" in r.verdict
    assert r.ranked[0]["repo"] == "user code"


def test_a_library_refusing_its_own_call_stays_the_callers(tmp_path: Path) -> None:
    """No override: transformers' own ``Trainer.log`` refuses transformers' call (its own bug)."""
    text = _traceback(tmp_path, "from trl import DPOTrainer\nfrom transformers import Trainer\n\nTrainer().train()\n",
                      TRAINER_OWN_BUG)
    assert "Trainer.log() takes 2 positional arguments but 3 were given" in text
    r = route(failure_from_text(text))
    assert r.target == "huggingface/transformers"
    assert r.boundary is None and "override" not in r.verdict
