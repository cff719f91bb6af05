"""Candidates on a real local Ray cluster (`ray.init` with two worker CPUs, started once for the
module): corpus scripts reduce to the local engine's results through the same oracle and search,
accepting the same sequence; a stale run's cancel kills its process group on the node; slots run
warm from their node's zygote; the CLI's --cluster reduces a script end to end.

Needs the extra (skipped cleanly without it): pip install 'reprobot[ray]'."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.ray_support import CORPUS, gone, local_result, need_ray, reduce_with

ray = need_ray()
pytestmark = pytest.mark.ray

from reducer.cluster.ray_runner import RayRunner, job_runtime_env  # noqa: E402
from reducer.run.runner import Runner, RunSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cluster():
    # address="local": a new instance even where another Ray on this machine could be joined
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             runtime_env=job_runtime_env())
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def _copy(name: str, folder: Path) -> Path:
    """One corpus script alone in a folder (a slot ships the script's whole folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / name
    dst.write_text((CORPUS / name).read_text(encoding="utf-8"), encoding="utf-8")
    return dst


# One corpus script: a reduction through Ray costs about a minute on a loaded 2-core machine;
# bench/ray_throughput.py runs more of them side by side.
@pytest.mark.parametrize("name", ["constants_dead_code.py"])
def test_corpus_scripts_reduce_to_the_local_result_with_the_same_accepted_sequence(cluster, tmp_path: Path,
                                                                                  name: str) -> None:
    script = _copy(name, tmp_path / "job")
    local = local_result(script)
    runner = RayRunner(Runner(RunSpec(script=script)), slots=2, notify=lambda line: None)
    try:
        assert runner.slots == 2
        remote = reduce_with(runner, script.read_text(encoding="utf-8"), jobs=2)
        stats = runner.stats
    finally:
        runner.close()
    assert remote.best == local.best
    assert remote.accepted == local.accepted        # verdicts read in proposal order
    # every verdict came from a slot (a stale run cancelled before it got one made no run)
    assert remote.runs >= stats.runs >= remote.runs - remote.cancelled > 5
    assert stats.fallback is None and stats.reruns == 0
    assert len(local.best.splitlines()) <= 5 < len(script.read_text().splitlines()) // 5


def test_a_cancel_kills_the_remote_process_group(cluster, tmp_path: Path) -> None:
    script = tmp_path / "job" / "sleeper.py"
    script.parent.mkdir()
    source = textwrap.dedent("""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(os.environ["PID_FILE"], "w") as f:
            f.write(f"{os.getpid()} {child.pid}")
        time.sleep(120)
        """)
    script.write_text(source)
    pid_file = tmp_path / "pids"
    runner = RayRunner(Runner(RunSpec(script=script)), slots=1, notify=lambda line: None)
    stop = threading.Event()
    got: list = []

    def run() -> None:
        got.append(runner.run(source, timeout=200, extra_env={"PID_FILE": str(pid_file)}, cancel=stop))

    thread = threading.Thread(target=run)
    try:
        thread.start()
        deadline = time.monotonic() + 60
        while not (pid_file.is_file() and len(pid_file.read_text().split()) == 2):
            assert time.monotonic() < deadline, "the remote run never started"
            time.sleep(0.1)
        pids = [int(p) for p in pid_file.read_text().split()]
        t0 = time.monotonic()
        stop.set()
        thread.join(timeout=60)
        assert not thread.is_alive()
        assert time.monotonic() - t0 < 15
        assert runner.stats.cancels == 1
    finally:
        stop.set()
        thread.join(timeout=60)
        runner.close()
    outcome = got[0]
    assert outcome.stopped_early and outcome.returncode is None
    for pid in pids:      # the script and its child (same group) are gone on the node
        assert gone(pid), pid


def test_slots_run_warm_from_their_nodes_zygote(cluster, tmp_path: Path) -> None:
    script = _copy("constants_dead_code.py", tmp_path / "job")
    source = script.read_text(encoding="utf-8")
    from reducer.run.zygote import warm_imports
    modules = warm_imports(source, script.parent)
    assert modules
    local = Runner(RunSpec(script=script))
    cold = local.run(source, timeout=60)
    runner = RayRunner(local, slots=2, warm_modules=modules, notify=lambda line: None)
    try:
        warm = runner.run(source, timeout=60)
        forced_cold = runner.run(source, timeout=60, warm=False)
        assert runner.remote_warm_runs == 1 and runner.warm_runs == 1
    finally:
        runner.close()
    for outcome in (warm, forced_cold):
        assert outcome.returncode == cold.returncode
        assert [t.message for t in outcome.tracebacks] == [t.message for t in cold.tracebacks]


def test_the_cli_reduces_on_the_cluster(cluster, tmp_path: Path) -> None:
    script = _copy("constants_dead_code.py", tmp_path / "job")
    proc = subprocess.run([sys.executable, "-m", "bot", "reduce", script.name, "--cluster", cluster, "--no-env",
                           "--out", str(tmp_path / "repros")], cwd=script.parent, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "cluster: 2 slot(s) on 1 node(s)" in proc.stdout
    folder = next((tmp_path / "repros").iterdir())
    reduction = json.loads((folder / "reduction.json").read_text())
    assert reduction["status"] == "done"
    assert reduction["cluster"]["runs"] > 5 and reduction["cluster"]["fallback"] is None
    assert reduction["statements_after"] <= 3
    repro = subprocess.run([sys.executable, str(folder / "repro.py")], capture_output=True, text=True, cwd=tmp_path)
    assert "No closing quotation" in repro.stderr
