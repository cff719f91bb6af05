"""`contrast` on real runs: a stop (SIGTERM) keeps the changes that ran, with a line saying after how
many it stopped; a run is judged once the repro's failure is on screen, not after the teardown that
follows; and the changes a repro's data literals give run last and fewer (a vocabulary is not a
device map, a list of records loses one key in every row at once)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bot.cli import main
from bot.rerun.contrast import changes
from reducer.errors import ExitCode
from reducer.failure.signature import MatchOptions, distinct_failures
from reducer.run.runner import Runner, RunSpec

ROOT = Path(__file__).resolve().parent.parent

# After printing its failure the script lingers (a teardown, a thread left running): 30 s.
LINGERS = '''\
import sys
import time


def linger(*exc):
    sys.__excepthook__(*exc)
    sys.stderr.flush()
    time.sleep(30)


sys.excepthook = linger


def configure(size=1, strict=False):
    if strict:
        raise ValueError(f"strict mode needs an accelerator (size {size})")


configure(size=2, strict=True)
'''
# Each run takes a second: enough to stop it in the middle.
SLOW = '''\
import time


def configure(a=1, b=2, c=3, d=4, e=5, f=6, strict=False):
    time.sleep(1)
    if strict:
        raise ValueError("strict mode needs an accelerator")


configure(a=0, b=0, c=0, d=0, e=0, f=0, strict=True)
'''


def make_repro(folder: Path, source: str) -> Path:
    """A repro folder as `reduce` leaves it: repro.py and the signature of its failure, from a run."""
    folder.mkdir(parents=True)
    (folder / "repro.py").write_text(source)
    # the signature from a run that does not linger (the same failure, without the 30 s after it)
    plain = source.replace("sys.excepthook = linger\n", "")
    outcome = Runner(RunSpec(script=folder / "repro.py", python=sys.executable, timeout=60)).run(plain)
    (sig, record), *_ = distinct_failures(outcome, MatchOptions())
    (folder / "signature.json").write_text(json.dumps({
        "signature": sig.to_dict(), "options": MatchOptions().to_dict(), "record": record.to_dict(),
        "script": "repro.py", "args": [], "runs": [{"wall_time": outcome.wall_time}]}))
    return folder


def test_a_run_is_judged_once_the_failure_is_on_screen(tmp_path: Path) -> None:
    folder = make_repro(tmp_path / "lingers", LINGERS)
    started = time.monotonic()
    assert main(["contrast", str(folder), "--python", sys.executable, "--json"]) == 0
    data = json.loads((folder / "contrast.json").read_text())
    kinds = {c["change"]: c["verdict"]["kind"] for c in data["changes"]}
    assert kinds == {"without `size=2` (the default)": "same failure", "without `strict=True` (the default)": "PASS",
                     "`strict=True` -> `strict=False`": "PASS"}
    # the failing change's run ended with its failure, not 30 s later
    same = next(c for c in data["changes"] if c["verdict"]["kind"] == "same failure")
    assert same["verdict"]["wall_time"] < 10
    assert time.monotonic() - started < 25
    assert data["planned"] == 3 and data["stopped"] is None


def test_sigterm_keeps_the_changes_that_ran_and_says_after_how_many(tmp_path: Path) -> None:
    folder = make_repro(tmp_path / "slow", SLOW)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "bot", "contrast", str(folder), "--python", sys.executable, "--json"]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    written = folder / "contrast.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if written.is_file() and len(json.loads(written.read_text()).get("changes") or []) >= 2:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stopped_at = time.monotonic()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == ExitCode.TERMINATED
    assert time.monotonic() - stopped_at < 10            # the run in flight is killed, not waited for
    data = json.loads(written.read_text())
    ran = len(data["changes"])
    assert 2 <= ran < data["planned"] == 8
    assert data["stopped"] == f"contrast stopped after {ran} of 8 changes"
    assert f"contrast stopped after {ran} of 8 changes" in err
    assert json.loads(out)["changes"] == data["changes"]     # --json prints what ran
    assert data["runs"] >= ran


def test_data_literals_give_fewer_changes_and_run_after_the_settings() -> None:
    src = '''\
vocab = {"[PAD]": 0, "[UNK]": 1, "good": 2, "bad": 3}
labels = {"neg": 0, "pos": 1}
rows = [
    {"prompt": "q", "chosen": "good", "rejected": "bad"},
    {"prompt": "q2", "chosen": "good", "rejected": "bad"},
]
args = Config(output_dir="out", bf16=False, device_map={"model.embed": 0, "lm_head": 1})
'''
    described = [c.description for c in changes(src)]
    # integers alone do not make a device map: a vocabulary and a label map are not collapsed
    collapsed = [d for d in described if d.startswith("device_map collapsed")]
    assert collapsed == ['device_map collapsed to one device: `{"": 0}`',
                         'device_map collapsed to one device: `{"": 1}`']
    # a list of records loses one key in every row at once
    assert 'without the entry `"chosen"` in each of the 2 rows' in described
    assert not any(d.startswith('without the entry `"chosen": ') for d in described)
    # the settings first, the data's entries last
    first_data = described.index('without the entry `"[PAD]": 0`')
    assert all(i < first_data for i, d in enumerate(described) if "bf16" in d or "output_dir" in d)
    assert described[-3:] == ['without the entry `"prompt"` in each of the 2 rows',
                              'without the entry `"chosen"` in each of the 2 rows',
                              'without the entry `"rejected"` in each of the 2 rows']
    rows_change = next(c for c in changes(src) if c.description.startswith('without the entry `"chosen"`'))
    assert rows_change.source.count('"chosen"') == 0 and rows_change.source.count('"prompt"') == 2


# The first run that gets past `configure` aborts (a teardown crash on a loaded machine); every
# other run is what the change makes it. `size` other than 1 fails differently for good.
ONCE = '''\
import os


def configure(size=1, strict=False):
    if strict:
        raise ValueError("strict mode needs an accelerator")
    if size != 1:
        raise KeyError("size")


COUNT = {count!r}
n = int(open(COUNT).read()) if os.path.exists(COUNT) else 0
with open(COUNT, "w") as f:
    f.write(str(n + 1))
configure(size={size}, strict=True)
if not os.path.exists(COUNT + ".aborted"):
    open(COUNT + ".aborted", "w").close()
    os.abort()
'''


def test_a_different_failure_is_run_again_and_a_lone_crash_is_outvoted(tmp_path: Path) -> None:
    count = tmp_path / "count"
    folder = make_repro(tmp_path / "once", ONCE.format(count=str(count), size=1))     # run 1: the signature
    assert main(["contrast", str(folder), "--python", sys.executable, "--json"]) == 0
    data = json.loads((folder / "contrast.json").read_text())
    (change,) = [c for c in data["changes"] if c["change"] == "without `strict=True` (the default)"]
    # one of its three runs aborted; the other two passed: a pass, with the odd run named
    assert change["verdict"]["kind"] == "PASS"
    assert change["verdict"]["detail"].startswith("1 of 3 runs: different failure")
    assert int(count.read_text()) == 1 + data["runs"]


def test_a_different_failure_that_holds_is_run_twice_and_kept(tmp_path: Path) -> None:
    count = tmp_path / "count"
    folder = make_repro(tmp_path / "holds", ONCE.format(count=str(count), size=2))
    Path(f"{count}.aborted").touch()                   # no run aborts
    assert main(["contrast", str(folder), "--python", sys.executable, "--json"]) == 0
    data = json.loads((folder / "contrast.json").read_text())
    kinds = {c["change"]: (c["verdict"]["kind"], c["verdict"]["detail"]) for c in data["changes"]}
    kind, detail = kinds["without `strict=True` (the default)"]
    assert kind == "different failure" and "KeyError" in detail and "1 of 3" not in detail
    # both different-failure changes ran twice, the rest once; and one traced run came first
    # (what the repro's functions returned to the library: bot/rerun/contrast.py's handed_back)
    differ = sum(k == "different failure" for k, _ in kinds.values())
    assert data["runs"] == len(kinds) + differ + 1


# A C function as a finalizer: it runs while the interpreter finalizes, with no Python frame
# (gloo's process groups abort so at teardown). Called at module level, it aborts mid-script.
ABORTS = '''\
import ctypes
import faulthandler

faulthandler.enable()
libc = ctypes.CDLL(None)
libc.abort.argtypes = []


class Teardown:
    __del__ = libc.abort


keep = Teardown()
{mid}print("done")
'''


def test_a_crash_after_the_script_ran_to_its_end_is_a_pass_that_says_so(tmp_path: Path) -> None:
    from bot.rerun.verdict import Kind, classify
    script = tmp_path / "a.py"
    script.write_text("raise KeyError('k')\n")
    run = Runner(RunSpec(script=script, python=sys.executable, timeout=60))
    ((target, _),) = distinct_failures(run.run(script.read_text()), MatchOptions())
    late = classify(run.run(ABORTS.format(mid="")), target, MatchOptions())
    assert late.kind is Kind.PASS and late.detail.startswith("ran to its end, then crashed at exit (FatalPythonError: Aborted")
    # the same abort while the script runs shows the script's frame: never a pass
    mid = classify(run.run(ABORTS.format(mid="libc.abort()\n")), target, MatchOptions())
    assert mid.kind is Kind.DIFFERENT and "Aborted" in mid.detail
