"""A failure that shows only in some runs: measured, kept, stated; never passed off as deterministic.

The scripts' draws come from an attempt counter kept by a small module on PYTHONPATH (a library
to the reduction: it never edits it, and no candidate can corrupt the count), in a file named by
an environment variable, so each test sees the same sequence of failing and passing runs: a test
of the rule, not of luck. A candidate that stops calling it (``n = 0`` inlined) fails every time
and is refused as no longer flaky."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reducer.failure.flaky import Rate, clean_runs_to_refuse, keep_running, seed_calls, seeded_source

ROOT = Path(__file__).resolve().parent.parent

COUNTER = '''\
import os


def attempt():
    path = os.environ["FLAKY_COUNTER"]
    n = int(open(path).read()) if os.path.exists(path) else 0
    # atomic: a run killed or started while another writes must never read a half-written count
    with open(path + f".{os.getpid()}", "w") as fh:
        fh.write(str(n + 1))
    os.replace(path + f".{os.getpid()}", path)
    return n
'''

COUNTED = '''\
import os
import time
from flakycount import attempt


def noise(k):
    total = 0
    for i in range(k):
        total += i
    return total


settings = {"every": EVERY, "label": "run"}
print(noise(10), settings["label"])
n = attempt()
if n % settings["every"] == 0:
    raise RuntimeError(f"bad luck: {n / 1000:.3f}")
print("ok")
'''


def counter_env(tmp_path: Path, name: str = "count") -> dict:
    lib = tmp_path / "lib"
    lib.mkdir(exist_ok=True)
    (lib / "flakycount.py").write_text(COUNTER)
    return {"FLAKY_COUNTER": str(tmp_path / name), "PYTHONPATH": f"{ROOT}{os.pathsep}{lib}"}


def runs_made(tmp_path: Path, name: str = "count") -> int:
    return int((tmp_path / name).read_text())


def reprobot(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT), **(env or {})}, timeout=600)


def folder_of(store: Path) -> Path:
    [d] = [p for p in store.iterdir() if p.is_dir()]
    return d


def test_the_rules():
    # --runs 2 (the default): a failure in both runs costs what it always cost, two runs
    assert keep_running(1, 1, 2, 10) and not keep_running(2, 2, 2, 10)
    assert keep_running(2, 2, 3, 10) and not keep_running(3, 3, 3, 10)
    # a run that passed (or failed differently): measured to the cap
    assert keep_running(1, 2, 2, 10) and keep_running(2, 3, 2, 10) and not keep_running(5, 10, 2, 10)
    assert keep_running(1, 2, 12, 10) and not keep_running(6, 12, 12, 10)   # never fewer than --runs
    assert clean_runs_to_refuse(0.5) == 3 and clean_runs_to_refuse(1.0) == 1 and clean_runs_to_refuse(0.1) == 20
    assert Rate(7, 10).words() == "fails in 7 of 10 runs"
    src = '"""doc"""\nfrom __future__ import annotations\nimport numpy\nx = 1\n'
    out = seeded_source(src, 3)
    assert out.splitlines()[:4] == ['"""doc"""', "from __future__ import annotations",
                                    "import random; random.seed(3)  # fixed seed (reprobot: the failure is "
                                    "deterministic with it)", "import numpy; numpy.random.seed(3)"]
    compile(out, "x", "exec")
    assert seed_calls(src, 3) == ["random.seed(3)", "numpy.random.seed(3)"]
    assert all(c in out for c in seed_calls(src, 3))


@pytest.mark.parametrize("try_", range(4))
def test_half_flaky_reduced_with_its_rate_stated(tmp_path, try_):
    (tmp_path / "flaky.py").write_text(COUNTED.replace("EVERY", "2"))
    env = counter_env(tmp_path, f"count-{try_}")
    proc = reprobot("reduce", "flaky.py", "--out", "s", "--no-env", "--jobs", "1", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    d = folder_of(tmp_path / "s")
    sig = json.loads((d / "signature.json").read_text())
    assert sig["rate"] == {"failed": 5, "runs": 10} and sig["seed"] is None
    repro = (d / "repro.py").read_text()
    assert "noise" not in repro and "print" not in repro and "raise RuntimeError" in repro
    flaky = json.loads((d / "reduction.json").read_text())["flaky"]
    assert flaky["original"] == {"failed": 5, "runs": 10} and flaky["repro"]["runs"] == 10
    assert 0 < flaky["repro"]["failed"] < 10
    assert "flaky: the repro fails in" in " ".join(proc.stdout.split())
    from bot.issue.draft import build_draft
    body = build_draft(d, "transformers").body
    assert f"the repro fails in {flaky['repro']['failed']} of 10 runs" in body and "for i in $(seq 10)" in body


def test_ten_percent_flaky_refused_with_its_measured_rate(tmp_path):
    (tmp_path / "rare.py").write_text(COUNTED.replace("EVERY", "10"))
    proc = reprobot("reduce", "rare.py", "--out", "s", "--no-env", cwd=tmp_path, env=counter_env(tmp_path))
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 7, out        # ExitCode.FLAKY, never a deterministic-looking result
    assert "fails in 1 of 10 runs (10%)" in out and "too rare to reduce" in out
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").rglob("repro.py"))


SEEDED = '''\
import random
from flakycount import attempt

n = attempt()
# run 1 fails and run 2 passes whatever the seed; after that, the draw decides
if n == 1:
    raise SystemExit(0)
if n == 0 or random.random() < 0.5:
    raise RuntimeError("bad luck")
'''


def test_flakiness_that_a_fixed_seed_removes_is_reported_as_such(tmp_path):
    (tmp_path / "seeded.py").write_text(SEEDED)
    proc = reprobot("reduce", "seeded.py", "--out", "s", "--no-env", cwd=tmp_path, env=counter_env(tmp_path))
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 0, out
    d = folder_of(tmp_path / "s")
    sig = json.loads((d / "signature.json").read_text())
    assert sig["seed"] is not None and sig["rate"]["failed"] < sig["rate"]["runs"]
    assert f"random.seed({sig['seed']})" in (d / "repro.py").read_text()
    assert f"with random seed {sig['seed']} fixed" in out and "fails every time" in out
    assert f"deterministic with seed {sig['seed']}" in out
    # original.py stays the user's script; the seeded text that was reduced is kept beside it
    assert (d / "original.py").read_text() == SEEDED
    assert (d / "seeded.py").read_text() == seeded_source(SEEDED, sig["seed"])
    assert json.loads((d / "reduction.json").read_text())["flaky"]["seed"] == sig["seed"]
    from bot.issue.draft import build_draft
    assert "with a fixed random seed (the repro's first line) it fails every time" in build_draft(d, "transformers").body


def test_a_deterministic_failure_costs_what_it_always_cost(tmp_path):
    """Both confirmation runs fail: two runs of the original, no more, and no rate talk."""
    (tmp_path / "always.py").write_text(COUNTED.replace("EVERY", "1"))
    proc = reprobot("reduce", "always.py", "--out", "s", "--no-env", "--no-reduce", cwd=tmp_path,
                    env=counter_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert runs_made(tmp_path) == 2
    sig = json.loads((folder_of(tmp_path / "s") / "signature.json").read_text())
    assert sig["rate"] == {"failed": 2, "runs": 2} and sig["seed"] is None
    assert "reproduced 2/2 runs" in proc.stdout and "flaky" not in proc.stdout


def test_resume_keeps_the_rate(tmp_path):
    """--resume trusts the stored failure: a flaky one is still reduced (and verified) as flaky."""
    (tmp_path / "flaky.py").write_text(COUNTED.replace("EVERY", "2"))
    env = counter_env(tmp_path)
    first = reprobot("reduce", "flaky.py", "--out", "s", "--no-env", "--no-reduce", cwd=tmp_path, env=env)
    assert first.returncode == 0 and "flaky: fails in 5 of 10 runs" in " ".join(first.stdout.split())
    proc = reprobot("reduce", "flaky.py", "--out", "s", "--no-env", "--resume", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "as stored" in proc.stdout
    d = folder_of(tmp_path / "s")
    flaky = json.loads((d / "reduction.json").read_text())["flaky"]
    assert flaky["original"] == {"failed": 5, "runs": 10} and 0 < flaky["repro"]["failed"] < 10


PASSES_THIRD = '''\
from flakycount import attempt


def noise(k):
    return sum(range(k))


print(noise(4))
n = attempt()
if n % 3 != 2:      # runs 1 and 2 fail, run 3 (the warm check) passes, and so on
    raise RuntimeError("bad luck")
'''


def test_a_pass_at_the_warm_check_is_read_as_the_rate_first(tmp_path):
    """Both confirmation runs failed by chance and the warm check's run passed: that pass is
    evidence about the rate before it is evidence about the warm start. More cold runs show the
    rate (8 of 10), it is stored and stated, and the reduction runs as flaky (#40)."""
    (tmp_path / "third.py").write_text(PASSES_THIRD)
    proc = reprobot("reduce", "third.py", "--out", "s", "--no-env", "--jobs", "1", cwd=tmp_path,
                    env=counter_env(tmp_path))
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 0, out
    assert "does not fail the same way when started warm" not in out
    assert "a clean pass: running third.py cold again" in out
    d = folder_of(tmp_path / "s")
    sig = json.loads((d / "signature.json").read_text())
    assert sig["rate"] == {"failed": 8, "runs": 10} and sig["seed"] is None
    flaky = json.loads((d / "reduction.json").read_text())["flaky"]
    assert flaky["original"] == {"failed": 8, "runs": 10}
    assert "flaky: the repro fails in" in out
    assert "raise RuntimeError" in (d / "repro.py").read_text()
