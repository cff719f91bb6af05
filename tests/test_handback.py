"""The library failed on what the script's own code handed back to it (reducer/analysis/handback.py):
a traced run records it, `contrast` stores it, and the classifier reads it as a usage error
(a callback broke the contract of what it returns). Real runs: a fake library in its own file that
calls the script back, and a real torch DataLoader over a Dataset whose rows differ in shape."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from bot.cli import main
from bot.store import ReproDir
from bot.upstream.kind import BUG, USAGE, Evidence, LibFrame, classify, classify_repro, kind_line
from reducer.analysis.handback import Handback, handback_run
from reducer.run.runner import Runner, RunSpec
from tests.test_contrast_runs import make_repro

# A library in a file of its own: a loop that calls the user's hooks and uses what they return.
FAKE_LOOP = '''\
class Loop:
    def evaluate(self):
        return {"loss": 1.0}

    def run(self):
        metrics = {"step": 1}
        extra = self.evaluate()
        metrics.update(extra)
        return metrics

    def collect(self):
        batch = [self.row(i) for i in range(2)]
        width = len(batch[0][0])
        for row in batch:
            if len(row[0]) != width:
                raise ValueError(f"rows differ in length: {len(row[0])} != {width}")
        return batch

    def own_none(self):
        self.evaluate()
        settings = None
        settings.update({"a": 1})
'''

FORGOT_RETURN = '''\
from fakeloop import Loop


class MyLoop(Loop):
    def evaluate(self):
        print("evaluating")


MyLoop().run()
'''

ROWS_DIFFER = '''\
from fakeloop import Loop


class Rows(Loop):
    def __init__(self):
        self.data = [([1, 2, 3],), ([4, 5],)]

    def row(self, i):
        return self.data[i]


Rows().collect()
'''

# the hook returns None as well, but the library fails on a None of its own: no record
OWN_NONE = '''\
from fakeloop import Loop


class Quiet(Loop):
    def evaluate(self):
        pass


Quiet().own_none()
'''

# the hook's dict went back to the library, which then fails on a value of its own: no record
NOT_READ = '''\
from fakeloop import Loop


class Fine(Loop):
    def evaluate(self):
        return {"loss": 0.5}


loop = Fine()
loop.run()
loop.own_none()
'''


def _probe(tmp_path: Path, source: str) -> list[Handback]:
    lib = tmp_path / "lib"
    lib.mkdir(exist_ok=True)
    (lib / "fakeloop.py").write_text(FAKE_LOOP)
    script = tmp_path / "work" / "script.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(source)
    runner = Runner(RunSpec(script=script, python=sys.executable, timeout=60, env={"PYTHONPATH": str(lib)}))
    return handback_run(source, lambda src, launcher, env: runner.run(src, launcher=launcher, extra_env=env,
                                                                      warm=False))


def test_a_hook_that_returns_nothing_is_what_the_library_failed_on(tmp_path: Path) -> None:
    (found,) = _probe(tmp_path, FORGOT_RETURN)
    assert (found.func, found.returned, found.how, found.frame, found.local) == \
        ("MyLoop.evaluate", "None", "returned", "run", "extra")
    assert found.line == "metrics.update(extra)" and found.exc_type == "TypeError"
    assert found.path.endswith("fakeloop.py")


def test_rows_a_hook_returned_are_what_the_library_failed_on(tmp_path: Path) -> None:
    (found,) = _probe(tmp_path, ROWS_DIFFER)
    # the raising line reads the very tuple the hook returned (not the list that holds it)
    assert (found.func, found.returned, found.how, found.frame, found.local) == \
        ("Rows.row", "tuple of list", "returned", "collect", "row")
    assert found.message.startswith("rows differ in length")


def test_a_none_the_library_made_itself_is_not_the_hooks(tmp_path: Path) -> None:
    """``None`` has no identity: it counts only where the library frame assigned the hook's result
    to the local the raising line reads."""
    assert _probe(tmp_path, OWN_NONE) == []


def test_a_failure_on_the_librarys_own_values_records_nothing(tmp_path: Path) -> None:
    assert _probe(tmp_path, NOT_READ) == []


DATALOADER = '''\
import torch
from torch.utils.data import DataLoader, Dataset


class Clips(Dataset):
    def __init__(self, lengths):
        self.clips = [torch.zeros(n, 4) for n in lengths]

    def __len__(self):
        return len(self.clips)

    def __getitem__(self, i):
        return {"audio": self.clips[i], "label": i % 2}


for batch in DataLoader(Clips([5, 7, 5]), batch_size=3):
    print(batch["audio"].shape)
'''


def test_contrast_records_it_and_the_classifier_reads_usage(tmp_path: Path) -> None:
    """A real DataLoader stacking the clips a Dataset returned, of two lengths: torch.stack's
    RuntimeError reads as a bug from the error alone, as usage once contrast's traced run saw
    collate read what ``__getitem__`` returned."""
    folder = make_repro(tmp_path / "clips", DATALOADER)
    repro = ReproDir(folder)
    assert classify_repro(repro).kind == BUG
    assert main(["contrast", str(folder), "--python", sys.executable, "--json"]) == 0
    data = json.loads((folder / "contrast.json").read_text())
    (found,) = data["handback"]
    assert (found["func"], found["frame"], found["how"]) == ("Clips.__getitem__", "collate_tensor_fn", "holds")
    # the library's frame by its package path: no path of this machine is stored
    assert found["path"] == "torch/utils/data/_utils/collate.py"
    kind = classify_repro(repro)
    assert kind.kind == USAGE and "Clips.__getitem__()" in kind.reason
    line = kind_line(kind)
    assert "a traced run of the repro showed it" in line and "No run has confirmed it" not in line


def test_the_classifier_needs_the_record() -> None:
    ev = Evidence("TypeError", "'NoneType' object is not iterable",
                  [LibFrame(None, None, "<module>", "MyTrainer().train()"),
                   LibFrame("transformers", "transformers/trainer.py", "_maybe_log_save_evaluate",
                            "metrics.update(dataset_metrics)")], "MyTrainer().train()", whole=True)
    assert classify(ev).kind == BUG
    ev.handed_back = [{"func": "MyTrainer.evaluate", "returned": "None", "how": "returned",
                       "path": "transformers/trainer.py", "frame": "_maybe_log_save_evaluate",
                       "local": "dataset_metrics", "line": "metrics.update(dataset_metrics)"}]
    kind = classify(ev)
    assert kind.kind == USAGE and "MyTrainer.evaluate() and failed on what it returned (None)" in kind.reason
    assert kind.fix == "make MyTrainer.evaluate() return what _maybe_log_save_evaluate() expects"
